//! DiskSim parameter-file import (`.parv`, `.diskspecs`, `.model`, `.seek`). Being built on
//! the `devices` branch.
