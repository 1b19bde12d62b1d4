/*
 * The block filter ABI.
 *
 * A filter is a shared object named <name>.so in the filter directory. The
 * first five entry points are the Konnector filter ABI (IOStack D3.2, 5.3):
 * any filter written to it loads unmodified. The iostack_* entry points are
 * optional extensions; a filter that does not export one gets the default
 * stated next to it.
 *
 * Each volume loads a private copy of every filter it uses, so a filter may
 * keep its state in globals: two volumes never share them.
 */
#ifndef IOSTACK_FILTER_H
#define IOSTACK_FILTER_H

#include <stdbool.h>
#include <stddef.h>

/* --- Konnector ABI ---------------------------------------------------- */

/* Transform write payload in place on its way to the device. Setting
 * *doWrite = false means the filter has taken care of the write: filters
 * below it and the device do not see it. */
void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite);

/* Transform read payload in place on its way up to the initiator. */
void read_xform(void *buf, unsigned long cnt, unsigned long offset);

/* Called top to bottom before the device read. A filter that can answer
 * fills buf with the bytes it would hand upwards and sets *doRead = false;
 * only the filters above it then run read_xform. fdesc is the device.
 * A negative return fails the read. Optional (default: never answers). */
int pre_read(void *buf, unsigned long cnt, unsigned long int offset, unsigned int fdesc,
             bool *doRead);

/* Arguments from the stack spec, e.g. "key=0x5a" for xor(key=0x5a); ""
 * when none. A negative return rejects them. */
int pass_args(char *raw_arg_list);

/* The filter's display name. Optional. */
char *get_name(void);

/* --- IOStack extensions (all optional) -------------------------------- */

/* Requests reaching this filter are multiples of this many bytes at
 * multiples of it; the stack does read-modify-write around unaligned I/O.
 * Default 1. */
unsigned int iostack_alignment(void);

/* Error-returning transforms. A filter that exports one is called through
 * it instead of the Konnector entry point of the same direction, which it
 * may then omit (a filter needs one write and one read transform, either
 * kind). Return 0 on success or a negative errno: the stack then fails the
 * I/O with -EIO, before anything reaches the device (write) or the
 * initiator (read); a write that failed in any filter writes nothing.
 * Konnector's void transforms cannot fail, so a filter that can (it calls a
 * library, it allocates) should export these. */
int iostack_write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite);
int iostack_read_xform(void *buf, unsigned long cnt, unsigned long offset);

/* Nonzero when the entry points may run concurrently, including a read and
 * a write of the same blocks overlapping in time (a filter cannot see when
 * the device write completes; caches of device data therefore must not
 * claim this). If any filter of a stack lacks it, the stack runs one
 * request at a time (as Konnector did). */
int iostack_thread_safe(void);

/* Nonzero when the filter reads the device itself (through pre_read's
 * fdesc): it sees device bytes, so it must be the bottom filter. */
int iostack_reads_device(void);

/* Why pass_args failed, for the admin. */
const char *iostack_last_error(void);

/* Counters as "key=value key=value" (cache hits, throttled time, ...). */
int iostack_stats(char *out, size_t outlen);

/* Called before the private copy is unloaded: free memory, stop threads. */
void iostack_release(void);

#endif
