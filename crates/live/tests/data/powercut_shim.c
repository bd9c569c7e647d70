/* A power-loss model for crates/live/tests/crash.rs and the guest power cut of vm_launch.rs
 * (tests/common/powercut.rs builds it), loaded into the server with LD_PRELOAD.
 *
 * For the files named by WATTIO_SHIM_TRACK (one path, or several separated by ':') it passes
 * every call through and appends to the journal WATTIO_SHIM_LOG, in the order the calls
 * *returned*, each record carrying the index of its file in that list:
 *   'W' offset len data   a pwrite/write that returned len bytes written
 *   'Z' offset len        an fallocate that punched or zeroed a range
 *   'B' id / 'E' id       an fdatasync/fsync began / returned successfully
 * A write is durable once a sync of its file that began after it returned has returned: that
 * is all a real disk promises across a power cut (each image stands for its own disk). The test rebuilds, from the journal of a server it
 * killed with SIGKILL, the image a power cut at that instant could leave (the initial image
 * plus the durable writes, every other write dropped).
 *
 * WATTIO_SHIM_IGNORE_SYNC=1 turns fdatasync/fsync on the tracked file into no-ops that
 * return success: a server that never makes anything durable, the control that proves the
 * test can fail.
 *
 * Each record is one write(2) to an O_APPEND file, so records of concurrent threads never
 * interleave and a SIGKILL leaves at most the records of calls that had returned. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FD 4096
#define MAX_TRACK 8

static int log_fd = -1;
static char *track[MAX_TRACK];
static int ntrack;
static int ignore_sync;
/* fd -> 1 + the index of its file in WATTIO_SHIM_TRACK (0: not tracked). */
static unsigned char tracked[MAX_FD];
static uint64_t next_sync;

struct rec {
    uint32_t kind;
    uint32_t file; /* index in WATTIO_SHIM_TRACK */
    uint64_t a; /* offset, or the sync id */
    uint64_t b; /* length */
};

static void init(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *t = getenv("WATTIO_SHIM_TRACK");
    if (t) {
        char *list = strdup(t);
        for (char *save = 0, *p = strtok_r(list, ":", &save); p && ntrack < MAX_TRACK;
             p = strtok_r(0, ":", &save))
            track[ntrack++] = p;
    }
    const char *l = getenv("WATTIO_SHIM_LOG");
    const char *ig = getenv("WATTIO_SHIM_IGNORE_SYNC");
    ignore_sync = ig && ig[0] == '1';
    if (l) {
        int (*real_open)(const char *, int, ...) = dlsym(RTLD_NEXT, "open64");
        log_fd = real_open(l, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
}

static int is_tracked(int fd) { return fd >= 0 && fd < MAX_FD && tracked[fd]; }

static void note_open(int fd, const char *path) {
    init();
    if (fd < 0 || fd >= MAX_FD) return;
    tracked[fd] = 0;
    for (int i = 0; path && i < ntrack; i++)
        if (strcmp(path, track[i]) == 0) tracked[fd] = (unsigned char)(i + 1);
}

static void log_rec(int fd, uint32_t kind, uint64_t a, uint64_t b, const void *data, size_t n) {
    if (log_fd < 0) return;
    struct rec r = {kind, (uint32_t)(tracked[fd] - 1), a, b};
    if (!data) {
        (void)!write(log_fd, &r, sizeof r);
        return;
    }
    /* One write per record: header and data together (small records; the test writes
     * 4 KiB blocks). */
    size_t total = sizeof r + n;
    char *buf = malloc(total);
    if (!buf) return;
    memcpy(buf, &r, sizeof r);
    memcpy(buf + sizeof r, data, n);
    (void)!write(log_fd, buf, total);
    free(buf);
}

#define REAL(name, ret, ...)                                                                   \
    static ret (*real)(__VA_ARGS__);                                                           \
    if (!real) real = dlsym(RTLD_NEXT, name);

static int open_common(const char *sym, const char *path, int flags, mode_t mode) {
    int (*real)(const char *, int, ...) = dlsym(RTLD_NEXT, sym);
    int fd = real(path, flags, mode);
    note_open(fd, path);
    return fd;
}

int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = va_arg(ap, int);
    va_end(ap);
    return open_common("open", path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = va_arg(ap, int);
    va_end(ap);
    return open_common("open64", path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = va_arg(ap, int);
    va_end(ap);
    REAL("openat", int, int, const char *, int, ...);
    int fd = real(dirfd, path, flags, mode);
    note_open(fd, path);
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = va_arg(ap, int);
    va_end(ap);
    REAL("openat64", int, int, const char *, int, ...);
    int fd = real(dirfd, path, flags, mode);
    note_open(fd, path);
    return fd;
}

int close(int fd) {
    REAL("close", int, int);
    if (fd >= 0 && fd < MAX_FD) tracked[fd] = 0;
    return real(fd);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    REAL("pwrite64", ssize_t, int, const void *, size_t, off_t);
    ssize_t w = real(fd, buf, n, off);
    if (w > 0 && is_tracked(fd)) log_rec(fd, 'W', (uint64_t)off, (uint64_t)w, buf, (size_t)w);
    return w;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { return pwrite64(fd, buf, n, off); }

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off) {
    /* Split into positional writes so each lands in the journal with its data. */
    ssize_t total = 0;
    for (int i = 0; i < cnt; i++) {
        ssize_t w = pwrite64(fd, iov[i].iov_base, iov[i].iov_len, off + total);
        if (w < 0) return total ? total : w;
        total += w;
        if ((size_t)w < iov[i].iov_len) break;
    }
    return total;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
    return pwritev64(fd, iov, cnt, off);
}

static int sync_common(const char *sym, int fd) {
    int (*real)(int) = dlsym(RTLD_NEXT, sym);
    if (!is_tracked(fd)) return real(fd);
    if (ignore_sync) return 0;
    uint64_t id = __atomic_add_fetch(&next_sync, 1, __ATOMIC_SEQ_CST);
    log_rec(fd, 'B', id, 0, 0, 0);
    int ret = real(fd);
    if (ret == 0) log_rec(fd, 'E', id, 0, 0, 0);
    return ret;
}

int fdatasync(int fd) { return sync_common("fdatasync", fd); }
int fsync(int fd) { return sync_common("fsync", fd); }

int fallocate64(int fd, int mode, off_t off, off_t len) {
    REAL("fallocate64", int, int, int, off_t, off_t);
    int ret = real(fd, mode, off, len);
    /* Punch-hole and zero-range both leave zeros. */
    if (ret == 0 && is_tracked(fd) && (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)))
        log_rec(fd, 'Z', (uint64_t)off, (uint64_t)len, 0, 0);
    return ret;
}

int fallocate(int fd, int mode, off_t off, off_t len) { return fallocate64(fd, mode, off, len); }
