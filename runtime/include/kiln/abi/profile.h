/*===- kiln/abi/profile.h - the CPU step's profile marks -----------*- C -*-===*
 *
 * The functions every entry function of a bundle's CPU code calls
 * (kiln-profile-marks): once when it starts and once after each of its
 * commands. libkilnrt exports them; the code refers to them by name.
 *
 * When the environment variable KILN_CPU_PROFILE names a file as the runtime
 * library is loaded, a mark adds the time since the previous start or mark
 * to its command's total and count, in the code's own `slots` (slot 0 the
 * last time, then two per command id); when the code is unloaded the runtime
 * writes the report (docs/runtime.md, Profile). Otherwise both return at
 * once. Marks of one bundle's code must not run on two threads at once
 * (a session runs one entry point at a time).
 *
 *===----------------------------------------------------------------------===*/

#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include <stdint.h>

#if defined(KILN_RUNTIME_BUILDING_LIBRARY)
#define KILN_PROFILE_API __attribute__((visibility("default")))
#else
#define KILN_PROFILE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* An entry function starts: the next mark's time counts from now. */
KILN_PROFILE_API void kiln_cpu_profile_start(int64_t *slots);

/* Command `id` is done: slots[1 + 2 id] += nanoseconds since the last start
 * or mark, slots[2 + 2 id] += 1. */
KILN_PROFILE_API void kiln_cpu_profile_mark(int64_t *slots, int32_t id);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_PROFILE_H */
