/* DL_AVX2_CLONES before a function compiles it twice, for AVX2 and for the
 * baseline, the copy chosen when the library loads (GCC's target_clones,
 * through an ifunc of glibc on x86-64), so that loops the compiler
 * vectorises use 256-bit vectors on CPUs that have them.  Elsewhere it is
 * nothing. */
#ifndef DL_CLONES_H
#define DL_CLONES_H

#include <stdlib.h> /* defines __GLIBC__ with glibc */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define DL_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DL_AVX2_CLONES
#endif

#endif
