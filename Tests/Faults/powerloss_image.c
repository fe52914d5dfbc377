// powerloss_image: rebuilds what a disk could hold after a power loss, from the files as they were
// when a process started (all of it durable), and the record log the power-loss shim (powerloss.c)
// kept of what the process did to them (docs/POWERLOSS.md).
//
//     cc -O2 -o powerloss_image powerloss_image.c        (powerloss.h beside it)
//     powerloss_image [--seed N] [--unit BYTES] [--style S] [--names-need-dirsync] [--check DIR]
//                     BASE LOG OUT
//
// BASE holds the tracked files at the start (paths relative to the tracked directory), OUT (new or
// empty) receives the image. The model: what a flush covered is on disk; of the rest, each page
// (--unit bytes, 4096 by default; 512 for torn sectors) holds, independently of the others, its
// content after any one of the writes to it since its last flush, or after none of them (the page
// cache writes a page back with its content of that moment, at any moment). A file's size is the one
// its last flush saw, or one it had later. Changes of names (creating, renaming, linking, removing
// files) are taken as durable when made (foliod flushes the directories it changes); with
// --names-need-dirsync only those that an fsync of their directory covered are, and of the later
// ones a random first few (journaled file systems keep them in order).
//
// Each page draws its content with --seed; --style says how: `uniform` (any of its versions),
// `synced` (only what was flushed), `coin` (what was flushed, or its last version), `latest` (every
// write kept: the files as the process left them), or `mixed` (default: one of uniform, uniform,
// synced, coin, drawn from the seed). --check DIR first checks the log against the files in DIR,
// where the process left them: each page of each must be one of the versions the log gives it, each
// size one the log gives, each name one the log made; otherwise the shim missed a write.
//
// Prints one line: seed=… style=… records=… files=… synced_bytes=… pages_unsynced=… pages_kept=…
// pages_latest=… sizes_unsynced=… names_unsynced=… (pages_kept counts pages holding at least one
// write the last flush did not cover, pages_latest those holding their last one), and with --check
// checked_pages_behind=… (pages of DIR not at their last version: writes the kill cut short). Exit
// status 0, 1 if the log cannot be made into an image or the check fails, 64 on a usage error.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powerloss.h"

enum style { STYLE_UNIFORM, STYLE_SYNCED, STYLE_COIN, STYLE_LATEST, STYLE_MIXED };
static const char *style_names[] = {"uniform", "synced", "coin", "latest", "mixed"};

// Flushes none of the others covers all of. Two threads' flushes can end, and so be logged, in
// another order than they began (the confirming thread's fdatasync begun before LMDB's own and
// ended after it): the last one logged need not be the one that covered most.
struct flushes {
    const struct powerloss_record **items;
    int count, capacity;
};

// One page of a file: the writes to it, in log order, by seq.
struct unit {
    uint64_t *seqs;
    uint32_t count, capacity;
    // Of the flushes of ranges holding this page (O_DSYNC writes, msync), the one that covered most
    // of its writes.
    const struct powerloss_record *range_sync;
    // Writes at or below `floor` were flushed; the page holds the content after write `cutoff`.
    uint32_t floor, cutoff;
    // Writes met so far while building the image.
    uint32_t applied;
};

struct size_change {
    uint64_t seq;
    uint64_t size;
};

// A file (an inode), from the base image or made during the run.
struct object {
    int has_inode;
    uint64_t dev, ino;
    char *label;            // a name it had, for messages
    mode_t mode;
    uint8_t *base;          // its content in BASE
    uint64_t base_size;
    uint64_t size;          // while reading the log: its size then
    uint64_t largest;       // the largest size it had
    struct unit *units;
    uint64_t unit_count;
    struct size_change *sizes;  // sizes[0] is the base size (seq UINT64_MAX: before the log)
    uint64_t size_count, size_capacity;
    struct flushes whole;   // flushes of the whole file
    struct flushes any;     // flushes of any of it, which put its size on disk
    uint64_t chosen_size;
    uint8_t *content;
    int names;              // names it has while reading the log
    int unseen;             // written where the shim could not see (PL_MAPPED, PL_UNSEEN)
};

struct binding {
    char *path;
    int object;
};

struct names {
    struct binding *items;
    int count, capacity;
};

enum name_kind { NAME_CREATE, NAME_RENAME, NAME_LINK, NAME_UNLINK };

// A change of names, with the object it concerns resolved while reading the log.
struct name_change {
    uint64_t seq;
    enum name_kind kind;
    int object;
    const char *old_path, *new_path;
};

static struct object *objects;
static int object_count, object_capacity;
static struct name_change *changes;
static int change_count, change_capacity;
static const struct powerloss_record **dirsyncs;
static int dirsync_count, dirsync_capacity;
static struct flushes everything;  // sync() and syncfs()
// What each record wrote (zeros for truncations and punched holes): at most one range of one object.
struct extent {
    int object;
    uint64_t offset, length;
};
static struct extent *extents;
static uint64_t unit_size = 4096;
static uint64_t random_state;

static void fail(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    fputs("powerloss_image: ", stderr);
    vfprintf(stderr, format, arguments);
    fputc('\n', stderr);
    va_end(arguments);
    exit(1);
}

static void *grow(void *items, int *capacity, int count, size_t size) {
    if (count < *capacity) return items;
    *capacity = *capacity ? *capacity * 2 : 16;
    items = realloc(items, (size_t)*capacity * size);
    if (!items) fail("out of memory");
    return items;
}

static uint64_t next_random(void) {
    random_state += 0x9E3779B97F4A7C15ull;
    uint64_t mixed = random_state;
    mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9ull;
    mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBull;
    return mixed ^ (mixed >> 31);
}

// A number in 0 ... limit.
static uint64_t draw(uint64_t limit) { return limit == 0 ? 0 : next_random() % (limit + 1); }

static uint8_t *read_file(const char *path, uint64_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat status;
    if (fd < 0 || fstat(fd, &status) != 0) fail("cannot read %s: %s", path, strerror(errno));
    uint8_t *bytes = malloc(status.st_size ? (size_t)status.st_size : 1);
    if (!bytes) fail("out of memory for %s", path);
    uint64_t done = 0;
    while (done < (uint64_t)status.st_size) {
        ssize_t got = read(fd, bytes + done, (size_t)status.st_size - done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) fail("cannot read %s: %s", path, got < 0 ? strerror(errno) : "it shrank");
        done += (uint64_t)got;
    }
    close(fd);
    *size = done;
    return bytes;
}

static int binding_index(struct names *names, const char *path) {
    for (int i = 0; i < names->count; i++)
        if (!strcmp(names->items[i].path, path)) return i;
    return -1;
}

static void bind(struct names *names, const char *path, int object) {
    int index = binding_index(names, path);
    if (index >= 0) {
        names->items[index].object = object;
        return;
    }
    names->items = grow(names->items, &names->capacity, names->count, sizeof(struct binding));
    names->items[names->count++] = (struct binding){strdup(path), object};
}

static void unbind(struct names *names, const char *path) {
    int index = binding_index(names, path);
    if (index < 0) return;
    free(names->items[index].path);
    names->items[index] = names->items[--names->count];
}

static int new_object(const char *label) {
    objects = grow(objects, &object_capacity, object_count, sizeof(struct object));
    struct object *object = &objects[object_count];
    *object = (struct object){.label = strdup(label), .mode = 0600};
    object->size_capacity = 4;
    object->sizes = malloc(sizeof(struct size_change) * 4);
    object->sizes[0] = (struct size_change){UINT64_MAX, 0};
    object->size_count = 1;
    return object_count++;
}

// Every regular file below `directory` (`relative` its path in the image) into `names`.
static void load_base(const char *directory, const char *relative, struct names *names) {
    DIR *listing = opendir(directory);
    if (!listing) fail("cannot list %s: %s", directory, strerror(errno));
    for (struct dirent *entry; (entry = readdir(listing));) {
        if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, "..")) continue;
        char path[8192], name[8192];
        snprintf(path, sizeof(path), "%s/%s", directory, entry->d_name);
        snprintf(name, sizeof(name), "%s%s%s", relative, *relative ? "/" : "", entry->d_name);
        struct stat status;
        if (lstat(path, &status) != 0) fail("cannot stat %s: %s", path, strerror(errno));
        if (S_ISDIR(status.st_mode)) {
            load_base(path, name, names);
        } else if (S_ISREG(status.st_mode)) {
            int index = new_object(name);
            struct object *object = &objects[index];
            object->base = read_file(path, &object->base_size);
            object->mode = status.st_mode & 07777;
            object->size = object->largest = object->sizes[0].size = object->base_size;
            object->names = 1;
            bind(names, name, index);
        }
    }
    closedir(listing);
}

static int object_by_inode(uint64_t dev, uint64_t ino) {
    for (int i = object_count - 1; i >= 0; i--)
        if (objects[i].has_inode && objects[i].dev == dev && objects[i].ino == ino) return i;
    return -1;
}

static void add_size(struct object *object, uint64_t seq, uint64_t size) {
    object->size = size;
    if (size > object->largest) object->largest = size;
    if (object->size_count == object->size_capacity) {
        object->size_capacity *= 2;
        object->sizes = realloc(object->sizes, sizeof(struct size_change) * object->size_capacity);
        if (!object->sizes) fail("out of memory");
    }
    object->sizes[object->size_count++] = (struct size_change){seq, size};
}

// The pages of [offset, offset + length) were written (zeros, or bytes) by record `seq`.
static void add_write(struct object *object, uint64_t seq, uint64_t offset, uint64_t length) {
    if (length == 0) return;
    extents[seq] = (struct extent){(int)(object - objects), offset, length};
    uint64_t first = offset / unit_size, last = (offset + length - 1) / unit_size;
    if (last >= object->unit_count) {
        uint64_t count = last + 1 > object->unit_count * 2 ? last + 1 : object->unit_count * 2;
        object->units = realloc(object->units, sizeof(struct unit) * count);
        if (!object->units) fail("out of memory");
        memset(object->units + object->unit_count, 0, sizeof(struct unit) * (count - object->unit_count));
        object->unit_count = count;
    }
    for (uint64_t page = first; page <= last; page++) {
        struct unit *unit = &object->units[page];
        if (unit->count == unit->capacity) {
            unit->capacity = unit->capacity ? unit->capacity * 2 : 4;
            unit->seqs = realloc(unit->seqs, sizeof(uint64_t) * unit->capacity);
            if (!unit->seqs) fail("out of memory");
        }
        unit->seqs[unit->count++] = seq;
    }
}

static void add_change(uint64_t seq, enum name_kind kind, int object, const char *old_path, const char *new_path) {
    changes = grow(changes, &change_capacity, change_count, sizeof(struct name_change));
    changes[change_count++] = (struct name_change){seq, kind, object, old_path, new_path};
}

static const char *payload(const struct powerloss_record *record) { return (const char *)(record + 1); }

static const char *second_string(const struct powerloss_record *record) {
    return payload(record) + strlen(payload(record)) + 1;
}

// Whether flush `sync` covers record `seq`: logged before the flush began, and returned by then.
static int covers(const struct powerloss_record *sync, uint64_t seq) {
    if (!sync || seq >= sync->ref) return 0;
    const uint64_t *pending = (const uint64_t *)(sync + 1);
    for (uint64_t i = 0; i < sync->count; i++)
        if (pending[i] == seq) return 0;
    return 1;
}

// How many of `seqs` (increasing) up to the last one `sync` covers.
static uint64_t covered_prefix(const uint64_t *seqs, uint64_t count, const struct powerloss_record *sync) {
    if (!sync) return 0;
    uint64_t low = 0, high = count;
    while (low < high) {
        uint64_t middle = (low + high) / 2;
        if (seqs[middle] < sync->ref) low = middle + 1;
        else high = middle;
    }
    while (low > 0 && !covers(sync, seqs[low - 1])) low--;
    return low;
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

// Whether `a` covers every record `b` covers: it began later, and what was under way then was too
// when `b` began.
static int dominates(const struct powerloss_record *a, const struct powerloss_record *b) {
    if (a->ref < b->ref) return 0;
    const uint64_t *pending = (const uint64_t *)(a + 1);
    for (uint64_t i = 0; i < a->count; i++)
        if (pending[i] < b->ref && covers(b, pending[i])) return 0;
    return 1;
}

static void add_flush(struct flushes *set, const struct powerloss_record *record) {
    for (int i = 0; i < set->count; i++)
        if (dominates(set->items[i], record)) return;
    int kept = 0;
    for (int i = 0; i < set->count; i++)
        if (!dominates(record, set->items[i])) set->items[kept++] = set->items[i];
    set->count = kept;
    set->items = grow(set->items, &set->capacity, set->count, sizeof(*set->items));
    set->items[set->count++] = record;
}

static int flushed(const struct flushes *set, uint64_t seq) {
    for (int i = 0; i < set->count; i++)
        if (covers(set->items[i], seq)) return 1;
    return 0;
}

static uint64_t flushed_prefix(const uint64_t *seqs, uint64_t count, const struct flushes *set) {
    uint64_t best = 0;
    for (int i = 0; i < set->count; i++) best = max64(best, covered_prefix(seqs, count, set->items[i]));
    return best;
}

// The directory of a name: "." for one directly in the tracked directory.
static void directory_of(const char *path, char *directory, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(directory, size, ".");
    else snprintf(directory, size, "%.*s", (int)(slash - path), path);
}

static int name_change_flushed(const struct name_change *change) {
    const char *path = change->kind == NAME_UNLINK || !change->new_path || !*change->new_path ? change->old_path
                                                                                              : change->new_path;
    if (!path || !*path) return 0;
    char directory[8192];
    directory_of(path, directory, sizeof(directory));
    if (flushed(&everything, change->seq)) return 1;
    for (int i = 0; i < dirsync_count; i++)
        if (!strcmp(payload(dirsyncs[i]) + dirsyncs[i]->count * sizeof(uint64_t), directory) &&
            covers(dirsyncs[i], change->seq))
            return 1;
    return 0;
}

static void apply_change(struct names *names, const struct name_change *change) {
    switch (change->kind) {
    case NAME_CREATE:
    case NAME_LINK:
        bind(names, change->new_path, change->object);
        break;
    case NAME_RENAME:
        unbind(names, change->old_path);
        if (*change->new_path) bind(names, change->new_path, change->object);
        break;
    case NAME_UNLINK:
        unbind(names, change->old_path);
        break;
    }
}

// The object a change of names concerns: the inode the shim saw at the old name.
static int changed_object(const struct powerloss_record *record, struct names *live, const char *old_path) {
    int index = object_by_inode(record->dev, record->ino);
    if (index >= 0) return index;
    int bound = *old_path ? binding_index(live, old_path) : -1;
    if (bound < 0) fail("record %llu changes the name of a file the base and log do not have (%s)",
                        (unsigned long long)record->seq, *old_path ? old_path : "outside the tracked directory");
    index = live->items[bound].object;
    objects[index].has_inode = 1;
    objects[index].dev = record->dev;
    objects[index].ino = record->ino;
    return index;
}

struct log {
    const struct powerloss_record **records;
    uint64_t count;
    uint64_t *done;        // a record's effective length (writes) or 0 when its call failed
    int truncated;         // the last record was cut short (SIGKILL mid-append)
};

static struct log read_log(const char *path) {
    struct log log = {0};
    uint64_t size;
    uint8_t *bytes = read_file(path, &size);
    uint64_t at = 0, capacity = 0;
    uint32_t pid = 0;
    while (at < size) {
        const struct powerloss_record *record = (const void *)(bytes + at);
        if (size - at < sizeof(*record) || size - at < record->size) {
            log.truncated = 1;
            break;
        }
        if (record->magic != POWERLOSS_MAGIC || record->size < sizeof(*record))
            fail("%s: no record at byte %llu", path, (unsigned long long)at);
        if (record->seq != log.count)
            fail("%s: record %llu is numbered %llu", path, (unsigned long long)log.count, (unsigned long long)record->seq);
        if (log.count == 0) pid = record->pid;
        else if (record->pid != pid)
            fail("%s: records of processes %u and %u: one log per process", path, pid, record->pid);
        if (log.count == capacity) {
            capacity = capacity ? capacity * 2 : 1024;
            log.records = realloc(log.records, sizeof(*log.records) * capacity);
            if (!log.records) fail("out of memory");
        }
        log.records[log.count++] = record;
        at += record->size;
    }
    log.done = malloc(sizeof(uint64_t) * (log.count + 1));
    extents = calloc(log.count + 1, sizeof(struct extent));
    if (!log.done || !extents) fail("out of memory");
    for (uint64_t i = 0; i < log.count; i++)
        log.done[i] = log.records[i]->kind == PL_WRITE ? log.records[i]->length : 1;
    for (uint64_t i = 0; i < log.count; i++)
        if (log.records[i]->kind == PL_RESULT && log.records[i]->ref < i) log.done[log.records[i]->ref] = log.records[i]->length;
    return log;
}

// Reads the log in order: objects, their pages' writes, sizes and flushes, and the changes of names.
static void replay_log(const struct log *log, struct names *live) {
    for (uint64_t i = 0; i < log->count; i++) {
        const struct powerloss_record *record = log->records[i];
        struct object *object = NULL;
        int index;
        switch (record->kind) {
        case PL_OPEN: {
            const char *path = payload(record);
            index = object_by_inode(record->dev, record->ino);
            if (index >= 0 && objects[index].names == 0 && (record->flags & PL_CREATED)) index = -1;  // inode reused
            if (index < 0 && *path) {
                int bound = binding_index(live, path);
                if (bound >= 0 && !objects[live->items[bound].object].has_inode) {
                    index = live->items[bound].object;
                } else if (bound >= 0) {
                    fail("%s was opened as a new file (record %llu) but the log never saw its old one go", path,
                         (unsigned long long)i);
                } else if (!(record->flags & PL_CREATED)) {
                    fail("%s was there before the run (record %llu) but not in the base image", path,
                         (unsigned long long)i);
                }
            }
            if (index < 0) {
                index = new_object(*path ? path : "(unnamed)");
                if (*path) {
                    objects[index].names = 1;
                    bind(live, path, index);
                    add_change(i, NAME_CREATE, index, NULL, path);
                }
            }
            object = &objects[index];
            object->has_inode = 1;
            object->dev = record->dev;
            object->ino = record->ino;
            if ((record->flags & PL_TRUNCATED) && object->size > 0) {
                add_write(object, i, 0, object->size);
                add_size(object, i, 0);
            }
            // A write of another thread may be logged and not yet made: its size is the one before.
            int size_known = object->size == record->offset;
            for (uint64_t k = object->size_count; k-- > 0 && k + 8 >= object->size_count && !size_known;)
                size_known = object->sizes[k].size == record->offset;
            if (!size_known)
                fail("%s had %llu bytes when opened (record %llu), but the base and log give it %llu: it was "
                     "changed where the shim did not see",
                     object->label, (unsigned long long)record->offset, (unsigned long long)i,
                     (unsigned long long)object->size);
            break;
        }
        case PL_WRITE:
        case PL_TRUNCATE:
        case PL_ALLOCATE:
        case PL_SYNC:
        case PL_MAPPED:
        case PL_UNSEEN:
            index = object_by_inode(record->dev, record->ino);
            if (index < 0) fail("record %llu is about a file never opened", (unsigned long long)i);
            object = &objects[index];
            if (record->kind == PL_WRITE) {
                uint64_t length = log->done[i];
                add_write(object, i, record->offset, length);
                if (length && record->offset + length > object->size) add_size(object, i, record->offset + length);
            } else if (record->kind == PL_TRUNCATE && log->done[i]) {
                if (record->offset < object->size) add_write(object, i, record->offset, object->size - record->offset);
                if (record->offset != object->size) add_size(object, i, record->offset);
            } else if (record->kind == PL_ALLOCATE && log->done[i]) {
                int mode = (int)record->flags;
                uint64_t end = record->offset + record->length;
                if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
                    fail("record %llu: fallocate mode %#x is not modelled", (unsigned long long)i, mode);
                if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
                    uint64_t zero_end = (mode & FALLOC_FL_KEEP_SIZE) && end > object->size ? object->size : end;
                    if (zero_end > record->offset) add_write(object, i, record->offset, zero_end - record->offset);
                }
                if (!(mode & FALLOC_FL_KEEP_SIZE) && end > object->size) add_size(object, i, end);
            } else if (record->kind == PL_SYNC) {
                if (record->length == 0) {
                    add_flush(&object->whole, record);
                } else {
                    // Writes to the page after this record are covered by neither: comparing now is exact.
                    uint64_t first = record->offset / unit_size, last = (record->offset + record->length - 1) / unit_size;
                    for (uint64_t page = first; page <= last && page < object->unit_count; page++) {
                        struct unit *unit = &object->units[page];
                        if (covered_prefix(unit->seqs, unit->count, record) >=
                            covered_prefix(unit->seqs, unit->count, unit->range_sync))
                            unit->range_sync = record;
                    }
                }
                add_flush(&object->any, record);
            } else if (record->kind == PL_MAPPED || record->kind == PL_UNSEEN) {
                object->unseen = 1;
            }
            break;
        case PL_SYNC_ALL:
            add_flush(&everything, record);
            break;
        case PL_DIRSYNC:
            dirsyncs = grow(dirsyncs, &dirsync_capacity, dirsync_count, sizeof(*dirsyncs));
            dirsyncs[dirsync_count++] = record;
            break;
        case PL_RENAME:
        case PL_LINK:
        case PL_UNLINK: {
            if (!log->done[i]) break;
            const char *old_path = payload(record);
            const char *new_path = record->kind == PL_UNLINK ? NULL : second_string(record);
            if (record->kind == PL_RENAME && !*old_path && *new_path)
                fail("record %llu moves a file from outside the tracked directory to %s: its content is unknown",
                     (unsigned long long)i, new_path);
            index = changed_object(record, live, old_path);
            object = &objects[index];
            if (record->kind == PL_RENAME && (record->flags & 2))  // RENAME_EXCHANGE
                fail("record %llu: renameat2 RENAME_EXCHANGE is not modelled", (unsigned long long)i);
            enum name_kind kind = record->kind == PL_LINK ? NAME_LINK : record->kind == PL_UNLINK ? NAME_UNLINK : NAME_RENAME;
            if (kind != NAME_LINK && *old_path) object->names--;
            if (kind != NAME_UNLINK && *new_path) {
                int replaced = binding_index(live, new_path);
                if (replaced >= 0 && live->items[replaced].object != index) objects[live->items[replaced].object].names--;
                object->names++;
                free(object->label);
                object->label = strdup(new_path);
            }
            struct name_change change = {i, kind, index, old_path, new_path};
            apply_change(live, &change);
            add_change(i, kind, index, old_path, new_path);
            break;
        }
        case PL_RESULT:
            break;
        default:
            fail("record %llu has an unknown kind %u", (unsigned long long)i, record->kind);
        }
    }
}

struct figures {
    uint64_t synced_bytes, pages_unsynced, pages_kept, pages_latest, sizes_unsynced, names_unsynced;
};

// The version each page and size keeps, under `style`.
static void choose(enum style style, struct figures *figures) {
    for (int i = 0; i < object_count; i++) {
        struct object *object = &objects[i];
        for (uint64_t page = 0; page < object->unit_count; page++) {
            struct unit *unit = &object->units[page];
            unit->floor = (uint32_t)max64(flushed_prefix(unit->seqs, unit->count, &object->whole),
                                          max64(flushed_prefix(unit->seqs, unit->count, &everything),
                                                covered_prefix(unit->seqs, unit->count, unit->range_sync)));
            uint32_t later = unit->count - unit->floor;
            switch (style) {
            case STYLE_UNIFORM: unit->cutoff = unit->floor + (uint32_t)draw(later); break;
            case STYLE_SYNCED: unit->cutoff = unit->floor; break;
            case STYLE_COIN: unit->cutoff = later && (next_random() & 1) ? unit->count : unit->floor; break;
            default: unit->cutoff = unit->count; break;
            }
            if (later) figures->pages_unsynced++;
            if (unit->cutoff > unit->floor) figures->pages_kept++;
            if (later && unit->cutoff == unit->count) figures->pages_latest++;
        }
        // Sizes: sizes[0] (the base) is always covered.
        uint64_t synced = 0;
        for (uint64_t k = object->size_count - 1; k > 0; k--)
            if (flushed(&object->any, object->sizes[k].seq) || flushed(&everything, object->sizes[k].seq)) {
                synced = k;
                break;
            }
        uint64_t later = object->size_count - 1 - synced, pick = synced;
        switch (style) {
        case STYLE_UNIFORM: pick = synced + draw(later); break;
        case STYLE_SYNCED: break;
        case STYLE_COIN: pick = later && (next_random() & 1) ? object->size_count - 1 : synced; break;
        default: pick = object->size_count - 1; break;
        }
        if (later) figures->sizes_unsynced++;
        object->chosen_size = object->sizes[pick].size;
    }
}

// The names at the end: all changes (or, with `strict`, those flushed and a random first few of the rest).
static void final_names(struct names *names, int strict, enum style style, struct figures *figures) {
    int flushed = -1;
    for (int i = 0; i < change_count; i++)
        if (name_change_flushed(&changes[i])) flushed = i;
    int unflushed = change_count - 1 - flushed;
    for (int i = flushed + 1; i < change_count; i++)
        if (!name_change_flushed(&changes[i])) figures->names_unsynced++;
    int keep = change_count;
    if (strict) {
        switch (style) {
        case STYLE_UNIFORM: keep = flushed + 1 + (int)draw((uint64_t)unflushed); break;
        case STYLE_SYNCED: keep = flushed + 1; break;
        case STYLE_COIN: keep = unflushed && (next_random() & 1) ? change_count : flushed + 1; break;
        default: break;
        }
    }
    for (int i = 0; i < keep; i++) apply_change(names, &changes[i]);
}

// Every object's content in the image: its base, then each write to each page up to the page's cutoff.
static void build(const struct log *log, struct figures *figures) {
    for (int i = 0; i < object_count; i++) {
        struct object *object = &objects[i];
        uint64_t room = max64(object->largest, object->unit_count * unit_size);
        free(object->content);
        object->content = calloc(room ? room : 1, 1);
        if (!object->content) fail("out of memory for %s", object->label);
        if (object->base) memcpy(object->content, object->base, object->base_size);
        for (uint64_t page = 0; page < object->unit_count; page++) object->units[page].applied = 0;
    }
    for (uint64_t i = 0; i < log->count; i++) {
        const struct extent *extent = &extents[i];
        if (extent->length == 0) continue;
        struct object *object = &objects[extent->object];
        const struct powerloss_record *record = log->records[i];
        const uint8_t *bytes = record->kind == PL_WRITE && !(record->flags & PL_ZERO) ? (const uint8_t *)(record + 1) : NULL;
        uint64_t end = extent->offset + extent->length;
        for (uint64_t page = extent->offset / unit_size; page <= (end - 1) / unit_size; page++) {
            struct unit *unit = &object->units[page];
            unit->applied++;
            uint64_t from = max64(extent->offset, page * unit_size);
            uint64_t to = end < (page + 1) * unit_size ? end : (page + 1) * unit_size;
            if (unit->applied <= unit->floor) figures->synced_bytes += to - from;
            if (unit->applied > unit->cutoff) continue;
            if (bytes) memcpy(object->content + from, bytes + (from - extent->offset), to - from);
            else memset(object->content + from, 0, to - from);
        }
    }
}

static void make_parents(const char *root, const char *path) {
    char buffer[8192];
    snprintf(buffer, sizeof(buffer), "%s/%s", root, path);
    for (char *slash = strchr(buffer + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = 0;
        if (mkdir(buffer, 0700) != 0 && errno != EEXIST) fail("cannot make %s: %s", buffer, strerror(errno));
        *slash = '/';
    }
}

static void write_image(const char *out, const struct names *names) {
    if (mkdir(out, 0700) != 0 && errno != EEXIST) fail("cannot make %s: %s", out, strerror(errno));
    for (int i = 0; i < names->count; i++) {
        const struct object *object = &objects[names->items[i].object];
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", out, names->items[i].path);
        make_parents(out, names->items[i].path);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, object->mode);
        if (fd < 0) fail("cannot write %s: %s", path, strerror(errno));
        uint64_t done = 0;
        while (done < object->chosen_size) {
            ssize_t wrote = write(fd, object->content + done, object->chosen_size - done);
            if (wrote < 0 && errno == EINTR) continue;
            if (wrote <= 0) fail("cannot write %s: %s", path, strerror(errno));
            done += (uint64_t)wrote;
        }
        if (close(fd) != 0) fail("cannot write %s: %s", path, strerror(errno));
    }
}

// One page of `object` as write `ordinal` of that page (0: none) left it, into `page_bytes`.
static void page_state(const struct log *log, const struct object *object, uint64_t page, uint32_t ordinal,
                       uint8_t *page_bytes) {
    uint64_t start = page * unit_size;
    memset(page_bytes, 0, unit_size);
    if (start < object->base_size)
        memcpy(page_bytes, object->base + start, object->base_size - start < unit_size ? object->base_size - start : unit_size);
    const struct unit *unit = page < object->unit_count ? &object->units[page] : NULL;
    for (uint32_t k = 0; unit && k < ordinal; k++) {
        const struct extent *extent = &extents[unit->seqs[k]];
        const struct powerloss_record *record = log->records[unit->seqs[k]];
        uint64_t end = extent->offset + extent->length;
        uint64_t from = max64(extent->offset, start);
        uint64_t to = end < start + unit_size ? end : start + unit_size;
        if (record->kind == PL_WRITE && !(record->flags & PL_ZERO))
            memcpy(page_bytes + (from - start), (const uint8_t *)(record + 1) + (from - extent->offset), to - from);
        else
            memset(page_bytes + (from - start), 0, to - from);
    }
}

// The files where the process left them (in `directory`) against the log: each file's names, size
// and pages must be ones the log gives it. Not necessarily the last ones: a call the kill caught
// between its record and its end (one per thread at most) may not have been made, or only in part
// (a write past the end killed after some of its pages leaves a size between two).
// Returns how many pages are not at their last version.
static uint64_t check_against(const struct log *log, const char *directory, const struct names *base) {
    struct names found = {0};
    int matched = 0;
    // The names after all changes, or all but the last few.
    for (int dropped = 0; dropped <= 4 && dropped <= change_count && !matched; dropped++) {
        struct names names = {0};
        for (int i = 0; i < base->count; i++) bind(&names, base->items[i].path, base->items[i].object);
        for (int i = 0; i < change_count - dropped; i++) apply_change(&names, &changes[i]);
        matched = 1;
        for (int i = 0; i < names.count && matched; i++) {
            char path[8192];
            struct stat status;
            snprintf(path, sizeof(path), "%s/%s", directory, names.items[i].path);
            const struct object *object = &objects[names.items[i].object];
            matched = lstat(path, &status) == 0 && S_ISREG(status.st_mode) && (!object->has_inode || status.st_ino == object->ino);
        }
        for (int i = 0; i < change_count && matched; i++) {
            const char *gone = changes[i].old_path && *changes[i].old_path ? changes[i].old_path : NULL;
            char path[8192];
            struct stat status;
            if (!gone || binding_index(&names, gone) >= 0) continue;
            snprintf(path, sizeof(path), "%s/%s", directory, gone);
            matched = lstat(path, &status) != 0;
        }
        if (matched) found = names;
    }
    if (!matched) fail("check: the names in %s are not the ones the log gives", directory);
    uint64_t behind = 0;
    uint8_t *expected = malloc(unit_size);
    for (int i = 0; i < found.count; i++) {
        const struct object *object = &objects[found.items[i].object];
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", directory, found.items[i].path);
        uint64_t size;
        uint8_t *bytes = read_file(path, &size);
        // A size the file had, or one between two, reached by a write the kill cut short.
        int size_known = 0;
        for (uint64_t k = 0; k < object->size_count && !size_known; k++)
            size_known = object->sizes[k].size == size ||
                         (k > 0 && log->records[object->sizes[k].seq]->kind == PL_WRITE &&
                          object->sizes[k - 1].size < size && size < object->sizes[k].size);
        if (!size_known)
            fail("check: %s has %llu bytes, a size the log never gives it (%s)", path, (unsigned long long)size,
                 object->unseen ? "it was written where the shim does not see" : "a change the shim missed");
        for (uint64_t page = 0; page * unit_size < size; page++) {
            uint64_t length = size - page * unit_size < unit_size ? size - page * unit_size : unit_size;
            uint32_t count = page < object->unit_count ? object->units[page].count : 0;
            int same = 0;
            for (uint32_t ordinal = count + 1; ordinal-- > 0 && !same;) {
                page_state(log, object, page, ordinal, expected);
                same = !memcmp(expected, bytes + page * unit_size, length);
                if (same && ordinal < count) behind++;
            }
            if (!same)
                fail("check: page %llu of %s (byte %llu) is none of the versions the log gives it (%s)",
                     (unsigned long long)page, path, (unsigned long long)(page * unit_size),
                     object->unseen ? "it was written where the shim does not see" : "a write the shim missed");
        }
        free(bytes);
    }
    free(expected);
    return behind;
}

static void usage(void) {
    fputs("usage: powerloss_image [--seed N] [--unit BYTES] [--style uniform|synced|coin|latest|mixed]\n"
          "                       [--names-need-dirsync] [--check DIR] BASE LOG OUT\n",
          stderr);
    exit(64);
}

int main(int argc, char **argv) {
    uint64_t seed = 0;
    enum style style = STYLE_MIXED;
    int strict = 0;
    const char *check = NULL, *positional[3];
    int positionals = 0;
    for (int i = 1; i < argc; i++) {
        const char *argument = argv[i];
        if (!strcmp(argument, "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argument, "--unit") && i + 1 < argc) unit_size = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argument, "--check") && i + 1 < argc) check = argv[++i];
        else if (!strcmp(argument, "--names-need-dirsync")) strict = 1;
        else if (!strcmp(argument, "--style") && i + 1 < argc) {
            const char *name = argv[++i];
            style = STYLE_MIXED + 1;
            for (int s = 0; s <= STYLE_MIXED; s++)
                if (!strcmp(name, style_names[s])) style = s;
            if (style > STYLE_MIXED) usage();
        } else if (argument[0] == '-' || positionals == 3) usage();
        else positional[positionals++] = argument;
    }
    if (positionals != 3 || unit_size < 512 || unit_size > 65536 || (unit_size & (unit_size - 1))) usage();
    random_state = seed;
    if (style == STYLE_MIXED) {
        static const enum style mix[] = {STYLE_UNIFORM, STYLE_UNIFORM, STYLE_SYNCED, STYLE_COIN};
        style = mix[next_random() % 4];
    }

    struct names base = {0}, live = {0};
    load_base(positional[0], "", &base);
    for (int i = 0; i < base.count; i++) bind(&live, base.items[i].path, base.items[i].object);
    struct log log = read_log(positional[1]);
    replay_log(&log, &live);
    for (int i = 0; i < object_count; i++)
        if (objects[i].unseen && objects[i].names > 0)
            fail("%s was written through a shared mapping or copy_file_range/sendfile, which the shim does not see",
                 objects[i].label);

    uint64_t behind = check ? check_against(&log, check, &base) : 0;

    struct figures figures = {0};
    struct names image = {0};
    for (int i = 0; i < base.count; i++) bind(&image, base.items[i].path, base.items[i].object);
    choose(style, &figures);
    final_names(&image, strict, style, &figures);
    build(&log, &figures);
    write_image(positional[2], &image);
    printf("powerloss_image: seed=%llu style=%s unit=%llu records=%llu%s files=%d synced_bytes=%llu "
           "pages_unsynced=%llu pages_kept=%llu pages_latest=%llu sizes_unsynced=%llu names_unsynced=%llu",
           (unsigned long long)seed, style_names[style], (unsigned long long)unit_size, (unsigned long long)log.count,
           log.truncated ? " (the last one cut short)" : "", image.count, (unsigned long long)figures.synced_bytes,
           (unsigned long long)figures.pages_unsynced, (unsigned long long)figures.pages_kept,
           (unsigned long long)figures.pages_latest, (unsigned long long)figures.sizes_unsynced,
           (unsigned long long)figures.names_unsynced);
    if (check) printf(" checked_pages_behind=%llu", (unsigned long long)behind);
    printf("\n");
    return 0;
}
