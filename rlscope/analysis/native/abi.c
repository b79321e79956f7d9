/* The library's version: its Python side (__init__.py) loads it only when the two agree, so a
 * cached library built from other sources is never called with this version's arguments. */
#include <stdint.h>

int64_t analysis_native_abi(void) { return 13; }
