// The record log that the power-loss shim (powerloss.c) writes and powerloss_image.c reads: what a
// process did to the files under one directory, in the order it did it, so that the disk a power
// loss could leave behind can be rebuilt afterwards (docs/POWERLOSS.md).
//
// The log is a sequence of records, each a `struct powerloss_record` followed by its payload and
// zeros up to a multiple of 8 bytes (`size` in all), appended with one system call on an O_APPEND
// descriptor. `seq` numbers the
// records 0, 1, 2, … in log order. Paths are relative to the tracked directory; "" stands for a
// path outside it or excluded from it.
#ifndef POWERLOSS_H
#define POWERLOSS_H

#include <stdint.h>

#define POWERLOSS_MAGIC 0x31524c50u /* "PLR1" */

enum powerloss_kind {
    // A tracked file was opened: dev, ino; flags PL_CREATED, PL_TRUNCATED; payload: its path.
    PL_OPEN = 1,
    // Before a write: offset, length; payload: the bytes, none with PL_ZERO (they are all zero).
    // With PL_DSYNC the write is durable once it returns (O_DSYNC, O_SYNC, RWF_DSYNC), which a
    // PL_SYNC of its range after it says.
    PL_WRITE = 2,
    // After a call logged before it did less than logged: `ref` is its record, `length` the bytes
    // it wrote (0 for a failed call, or a failed rename, link, unlink, truncate or allocation).
    PL_RESULT = 3,
    // Before an ftruncate: the new size in `offset`.
    PL_TRUNCATE = 4,
    // Before an fallocate: its mode in `flags`, offset, length.
    PL_ALLOCATE = 5,
    // After a successful fsync, fdatasync, msync(MS_SYNC) or O_DSYNC write: every write to the
    // file's bytes [offset, offset + length) (length 0: the whole file, and its size) that returned
    // before the flush began is on disk. Those are the records before `ref` except the `count`
    // ones still under way when the flush began, whose seqs (uint64_t) are the payload.
    PL_SYNC = 6,
    // After sync() or syncfs(): a PL_SYNC of every file and directory (ref, count, payload alike).
    PL_SYNC_ALL = 7,
    // Before rename, link, unlink: payload "old\0new\0" (PL_RENAME, PL_LINK) or "path\0".
    PL_RENAME = 8,
    PL_LINK = 9,
    PL_UNLINK = 10,
    // After a successful fsync of a tracked directory: payload its path ("." for the tracked
    // directory itself); ref, count and the seqs as for PL_SYNC, over the directory's entries.
    PL_DIRSYNC = 11,
    // A shared writable mapping of a tracked file: its writes through memory are not seen.
    PL_MAPPED = 12,
    // A write the shim cannot see the bytes of (copy_file_range, sendfile into a tracked file).
    PL_UNSEEN = 13,
};

enum powerloss_flag {
    PL_CREATED = 1 << 0,
    PL_TRUNCATED = 1 << 1,
    PL_ZERO = 1 << 2,
    PL_DSYNC = 1 << 3,
};

struct powerloss_record {
    uint32_t magic;
    uint32_t kind;
    // Bytes of the record, payload included.
    uint64_t size;
    uint64_t seq;
    uint32_t pid;
    uint32_t flags;
    // The file (st_dev, st_ino), for the kinds about one file.
    uint64_t dev;
    uint64_t ino;
    uint64_t offset;
    uint64_t length;
    uint64_t ref;
    uint64_t count;
};

#endif
