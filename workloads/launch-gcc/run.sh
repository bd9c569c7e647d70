#!/usr/bin/env bash
# Cold launch of the C compiler (driver, cc1, as, collect2/ld) compiling and linking a
# small program that includes a few system headers.
source "$(dirname "$0")/../capture.sh"
src=$(mktemp --suffix=.c)
printf '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\nint main(void){printf("%%f\\n", sqrt(2.0)); return 0;}\n' > "$src"
capture_launch -- gcc -O2 -o /tmp/wattio-launch-hello "$src" -lm
rm -f "$src" /tmp/wattio-launch-hello
