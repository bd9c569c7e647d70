/* Client requests of the wattio-mem Valgrind tool, for programs that want to mark phases in
 * their memory trace. Outside Valgrind the macro costs a few no-op instructions.
 *
 *   WATTIO_MEM_MARK(v)  writes back and empties the modelled caches (so what follows starts
 *                       cold and what preceded has reached memory), then records a `mark`
 *                       event carrying v. */
#ifndef WATTIO_MEM_H
#define WATTIO_MEM_H

#include <valgrind/valgrind.h>

enum { WATTIO_MEM_USERREQ_MARK = VG_USERREQ_TOOL_BASE('W', 'M') };

#define WATTIO_MEM_MARK(v) \
  VALGRIND_DO_CLIENT_REQUEST_STMT(WATTIO_MEM_USERREQ_MARK, (v), 0, 0, 0, 0)

#endif
