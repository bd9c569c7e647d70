/* wattio-mem: a Valgrind tool that records a program's main-memory traffic.
 *
 * Every data load and store of the client goes through a modelled two-level cache (L1D and
 * an inclusive L2, both write-back write-allocate with LRU replacement, indexed by virtual
 * address). What leaves the L2 is recorded: line fills (a read of one line from memory,
 * caused by a load or by a store's write-allocate) and write-backs of dirty lines, each
 * write-back with the line's old content (what memory held since the fill) and its new
 * content, so bit changes in an NVM behind the cache can be counted. With --wm-cache=no every
 * load and store is recorded instead (stores with their old and new bytes).
 *
 * Alongside: process events (start, exit with code), mappings (startup mappings, mmap,
 * munmap, brk growth and shrinkage, mremap) and marks set by the client (wattio_mem.h).
 * Time is the number of guest instructions executed so far in this process.
 *
 * The output is a compact binary stream (see FORMAT below), converted by wattio's formats
 * crate (crates/formats/src/memtrace.rs) into the columnar memory trace. Keep both in step.
 *
 * FORMAT (all integers little-endian; "v" = unsigned LEB128; "z" = zigzag LEB128):
 *   header: "WMEMRAW1", u32 pid, u32 ppid, u64 start time (us since the epoch),
 *           u32 line bytes, u32 L1 bytes, u32 L1 ways, u32 L2 bytes, u32 L2 ways,
 *           u8 cache on, u16 n + n bytes of command line (argv joined by spaces)
 *   records, each: u8 tag, v instructions since the previous record, then by tag
 *     1 fill       z address delta, u8 cause (0 load, 1 store)
 *     2 writeback  z address delta, old[line], changed-byte bitmap[line/8], the changed new bytes
 *     3 load       z address delta, v size
 *     4 store      z address delta, v size (<= 256), old[size], new[size]
 *     5 map        v address, v length, v flags; with flag 128 (a file mapping) also
 *                  v dev, v inode, v offset in the file, u16 n + n bytes of the file's path
 *     6 unmap      v address, v length, v flags
 *     7 mark       v value
 *     8 exit       z exit code, v accesses, v L1 misses, v fills, v write-backs,
 *                  v dirty lines dropped, v records dropped
 *   The address delta is relative to the previous fill/writeback/load/store address.
 *   Map flags: 1 read, 2 write, 4 exec, 16 startup mapping, 32 brk, 64 mremap, 128 file.
 */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_machine.h"
#include "pub_tool_options.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_xarray.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"
#include "wattio_mem.h"

enum { TAG_FILL = 1, TAG_WB, TAG_LOAD, TAG_STORE, TAG_MAP, TAG_UNMAP, TAG_MARK, TAG_EXIT };
enum { MAP_R = 1, MAP_W = 2, MAP_X = 4, MAP_STARTUP = 16, MAP_BRK = 32, MAP_REMAP = 64,
       MAP_FILE = 128 };
/* Largest store recorded as one record in uncached mode; longer ones (xsave, rep movs done
   by a helper) are split into pieces of this size. */
#define MAX_STORE 256
#define MAX_CMDLINE 4096

/* ---- options ---- */
static const HChar *clo_out = "wattio-mem.%p.raw";
static Bool clo_cache = True;
static Long clo_line = 64;
static Long clo_l1 = 32 * 1024, clo_l1_ways = 8;
static Long clo_l2 = 1024 * 1024, clo_l2_ways = 16;
static Long clo_max_records = 0; /* 0: no limit */
static Long clo_skip_records = 0; /* traffic records left out before the window */
static Bool clo_window_clock = False; /* left-out records' time is not counted */

/* ---- counters ---- */
static ULong icount;        /* guest instructions executed; bumped by inline IR */
static ULong last_icount;   /* time of the previous record */
static Addr last_addr;      /* address of the previous traffic record */
static ULong n_access, n_l1_miss, n_fill, n_wb, n_dropped_dirty, n_records, n_records_dropped;
static ULong n_skipped;

/* ---- output ---- */
static Int out_fd = -1;
static UChar obuf[1 << 16];
static Int olen;

static void out_flush(void)
{
   Int off = 0;
   while (off < olen) {
      Int n = VG_(write)(out_fd, obuf + off, olen - off);
      if (n <= 0) {
         VG_(umsg)("wattio-mem: cannot write the trace file; stopping\n");
         VG_(exit)(1);
      }
      off += n;
   }
   olen = 0;
}

static void out_bytes(const void *p, Int n)
{
   const UChar *b = p;
   while (n > 0) {
      Int room = (Int)sizeof(obuf) - olen, k = n < room ? n : room;
      VG_(memcpy)(obuf + olen, b, k);
      olen += k; b += k; n -= k;
      if (olen == (Int)sizeof(obuf)) out_flush();
   }
}

static void out_u8(UChar v) { out_bytes(&v, 1); }
static void out_u16(UShort v) { out_bytes(&v, 2); }
static void out_u32(UInt v) { out_bytes(&v, 4); }
static void out_u64(ULong v) { out_bytes(&v, 8); }

static void out_v(ULong v)
{
   UChar b[10];
   Int n = 0;
   do {
      b[n] = v & 0x7f;
      v >>= 7;
      if (v) b[n] |= 0x80;
      n++;
   } while (v);
   out_bytes(b, n);
}

static void out_z(Long v) { out_v(((ULong)v << 1) ^ (ULong)(v >> 63)); }

/* A record's tag and time; traffic records also their address. */
static void rec_head(UChar tag)
{
   out_u8(tag);
   out_v(icount - last_icount);
   last_icount = icount;
}

static void rec_traffic(UChar tag, Addr a)
{
   rec_head(tag);
   out_z((Long)(a - last_addr));
   last_addr = a;
}

/* The record window applies to traffic only: process events are always kept. A traffic
   record before the window (--wm-skip-records) or after it (--wm-max-records) is left out;
   with --wm-window-clock=yes so is its time (the trace's clock then counts the instructions
   inside the window, and those between the process events outside it and the left-out
   record before each), so a window keeps its own traffic rate and a process ends with it. */
static Bool traffic_allowed(void)
{
   Bool before = n_skipped < (ULong)clo_skip_records;
   if (before || (clo_max_records > 0 && n_records >= (ULong)clo_max_records)) {
      if (before) n_skipped++;
      n_records_dropped++;
      if (clo_window_clock) last_icount = icount;
      return False;
   }
   n_records++;
   return True;
}

static Bool readable(Addr a, SizeT n)
{
   return VG_(am_is_valid_for_client)(a, n, VKI_PROT_READ);
}

/* ---- the cache model ---- */
typedef struct {
   Addr tag;   /* line address */
   UInt slot;  /* L2: index of the line's memory snapshot in l2_data */
   UChar valid, dirty;
} Way;

typedef struct {
   Int sets, ways;
   Way *way; /* sets * ways, each set most recently used first */
} Level;

static Level L1, L2;
static UChar *l2_data;   /* one line per L2 way: memory's content as of the fill */
static Int line_shift;

static Way *set_of(Level *c, Addr line) { return &c->way[((line >> line_shift) & (c->sets - 1)) * c->ways]; }

/* Index of `line` in its set, or -1. */
static Int find(Level *c, Way *s, Addr line)
{
   for (Int i = 0; i < c->ways; i++)
      if (s[i].valid && s[i].tag == line) return i;
   return -1;
}

/* Moves way i of set s to the front (most recently used). */
static void to_front(Way *s, Int i)
{
   Way w = s[i];
   for (; i > 0; i--) s[i] = s[i - 1];
   s[0] = w;
}

/* The way a new line replaces: an invalid one if any, else the least recently used. */
static Int victim(Level *c, Way *s)
{
   for (Int i = 0; i < c->ways; i++)
      if (!s[i].valid) return i;
   return c->ways - 1;
}

static void emit_writeback(Addr line, const UChar *old)
{
   UChar cur[256], mask[32];
   Int n = (Int)clo_line;
   if (!readable(line, n)) {
      /* The page went away or lost read permission under a dirty line: its data is
         gone with it. Counted, reported at exit. */
      n_dropped_dirty++;
      return;
   }
   n_wb++;
   if (!traffic_allowed()) return;
   VG_(memcpy)(cur, (void *)line, n);
   VG_(memset)(mask, 0, sizeof mask);
   for (Int i = 0; i < n; i++)
      if (cur[i] != old[i]) mask[i / 8] |= 1 << (i % 8);
   rec_traffic(TAG_WB, line);
   out_bytes(old, n);
   out_bytes(mask, n / 8);
   for (Int i = 0; i < n; i++)
      if (mask[i / 8] & (1 << (i % 8))) out_u8(cur[i]);
}

/* Removes L2 way w (and the line's L1 copy, the L2 being inclusive); writes it back if it
   or its L1 copy is dirty and `write_back`, else counts a dirty line as dropped. */
static void evict_l2(Way *w, Bool write_back)
{
   Way *s1 = set_of(&L1, w->tag);
   Int i = find(&L1, s1, w->tag);
   Bool dirty = w->dirty;
   if (i >= 0) {
      dirty |= s1[i].dirty;
      s1[i].valid = 0;
   }
   if (dirty) {
      if (write_back) emit_writeback(w->tag, l2_data + (SizeT)w->slot * clo_line);
      else n_dropped_dirty++;
   }
   w->valid = 0;
   w->dirty = 0;
}

static void cache_access(Addr line, Bool write)
{
   Way *s1 = set_of(&L1, line);
   Int i = find(&L1, s1, line);
   n_access++;
   if (i >= 0) {
      to_front(s1, i);
      if (write) s1[0].dirty = 1;
      return;
   }
   n_l1_miss++;
   Way *s2 = set_of(&L2, line);
   Int j = find(&L2, s2, line);
   if (j < 0) {
      j = victim(&L2, s2);
      if (s2[j].valid) evict_l2(&s2[j], True);
      s2[j].tag = line;
      s2[j].valid = 1;
      s2[j].dirty = 0;
      UChar *snap = l2_data + (SizeT)s2[j].slot * clo_line;
      if (readable(line, clo_line)) VG_(memcpy)(snap, (void *)line, clo_line);
      else VG_(memset)(snap, 0, clo_line); /* the access itself is about to fault */
      n_fill++;
      if (traffic_allowed()) {
         rec_traffic(TAG_FILL, line);
         out_u8(write ? 1 : 0);
      }
   }
   to_front(s2, j);
   /* Install in L1; a dirty L1 victim goes to its L2 copy, present by inclusion. */
   i = victim(&L1, s1);
   if (s1[i].valid && s1[i].dirty) {
      Way *v2 = set_of(&L2, s1[i].tag);
      Int k = find(&L2, v2, s1[i].tag);
      tl_assert(k >= 0);
      v2[k].dirty = 1;
   }
   s1[i].tag = line;
   s1[i].valid = 1;
   s1[i].dirty = write ? 1 : 0;
   to_front(s1, i);
}

/* Writes back every dirty line and empties both levels (marks, exit). */
static void cache_flush(void)
{
   for (Int k = 0; k < L2.sets * L2.ways; k++)
      if (L2.way[k].valid) evict_l2(&L2.way[k], True);
}

/* Forgets the lines of [a, a+len) after they were unmapped: their data cannot be read. */
static void cache_drop(Addr a, SizeT len)
{
   if (!clo_cache) return;
   for (Int k = 0; k < L2.sets * L2.ways; k++)
      if (L2.way[k].valid && L2.way[k].tag >= a && L2.way[k].tag - a < len)
         evict_l2(&L2.way[k], False);
}

static void cache_init(void)
{
   Level *lv[2] = { &L1, &L2 };
   Long size[2] = { clo_l1, clo_l2 }, ways[2] = { clo_l1_ways, clo_l2_ways };
   for (Int l = 0; l < 2; l++) {
      lv[l]->ways = (Int)ways[l];
      lv[l]->sets = (Int)(size[l] / (clo_line * ways[l]));
      SizeT n = (SizeT)lv[l]->sets * lv[l]->ways;
      lv[l]->way = VG_(calloc)("wm.cache", n, sizeof(Way));
      for (SizeT k = 0; k < n; k++) lv[l]->way[k].slot = (UInt)k;
   }
   l2_data = VG_(calloc)("wm.l2data", (SizeT)L2.sets * L2.ways, clo_line);
   line_shift = VG_(log2)((UInt)clo_line);
}

/* ---- helpers called from instrumented code ---- */
static Addr store_addr;
static SizeT store_size;
static Bool store_old_ok;
static UChar store_old[MAX_STORE];

static VG_REGPARM(2) void wm_load(Addr a, SizeT size)
{
   if (!clo_cache) {
      if (traffic_allowed()) {
         rec_traffic(TAG_LOAD, a);
         out_v(size);
      }
      return;
   }
   Addr mask = ~((Addr)clo_line - 1);
   for (Addr l = a & mask; l < a + size; l += clo_line) cache_access(l, False);
}

/* Called before a store: the cache model's access (so a fill snapshots memory before the
   store changes it), or, uncached, the old bytes. */
static VG_REGPARM(2) void wm_store_pre(Addr a, SizeT size)
{
   if (clo_cache) {
      Addr mask = ~((Addr)clo_line - 1);
      for (Addr l = a & mask; l < a + size; l += clo_line) cache_access(l, True);
      return;
   }
   store_addr = a;
   store_size = size;
   store_old_ok = size <= MAX_STORE && readable(a, size);
   if (store_old_ok) VG_(memcpy)(store_old, (void *)a, size);
}

/* Called after a store, uncached only: the new bytes. Threads switch only between
   superblocks, so the pre call's state is this store's. */
static void emit_store(Addr a, SizeT n, const UChar *old)
{
   if (!traffic_allowed()) return;
   rec_traffic(TAG_STORE, a);
   out_v(n);
   out_bytes(old, (Int)n);
   out_bytes((void *)a, (Int)n);
}

static VG_REGPARM(2) void wm_store_post(Addr a, SizeT size)
{
   if (a != store_addr || size != store_size || !readable(a, size)) return;
   if (store_old_ok) {
      emit_store(a, size, store_old);
      return;
   }
   /* Too long for one record (xsave and the like): pieces, old bytes unknown, so recorded
      as equal to the new ones (no bit changes claimed). */
   for (SizeT off = 0; off < size; off += MAX_STORE) {
      SizeT n = size - off < MAX_STORE ? size - off : MAX_STORE;
      emit_store(a + off, n, (const UChar *)(a + off));
   }
}

/* ---- instrumentation ---- */
static void add_icount(IRSB *sb, Int *pending)
{
   if (*pending == 0) return;
   IRTemp t1 = newIRTemp(sb->tyenv, Ity_I64), t2 = newIRTemp(sb->tyenv, Ity_I64);
   IRExpr *where = mkIRExpr_HWord((HWord)&icount);
   addStmtToIRSB(sb, IRStmt_WrTmp(t1, IRExpr_Load(Iend_LE, Ity_I64, where)));
   addStmtToIRSB(sb, IRStmt_WrTmp(t2, IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(t1),
                                                   IRExpr_Const(IRConst_U64(*pending)))));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, where, IRExpr_RdTmp(t2)));
   *pending = 0;
}

enum { CALL_LOAD, CALL_STORE_PRE, CALL_STORE_POST };

static void add_call(IRSB *sb, Int which, IRExpr *addr, Int size, IRExpr *guard)
{
   static const HChar *names[] = { "wm_load", "wm_store_pre", "wm_store_post" };
   void *fns[] = { wm_load, wm_store_pre, wm_store_post };
   if (which == CALL_STORE_POST && clo_cache) return;
   IRDirty *d = unsafeIRDirty_0_N(2, names[which], VG_(fnptr_to_fnentry)(fns[which]),
                                  mkIRExprVec_2(addr, mkIRExpr_HWord((HWord)size)));
   if (guard) d->guard = guard;
   addStmtToIRSB(sb, IRStmt_Dirty(d));
}

static IRSB *wm_instrument(VgCallbackClosure *closure, IRSB *in, const VexGuestLayout *layout,
                           const VexGuestExtents *vge, const VexArchInfo *archinfo,
                           IRType gWordTy, IRType hWordTy)
{
   IRSB *out = deepCopyIRSBExceptStmts(in);
   Int i = 0, pending = 0;
   while (i < in->stmts_used && in->stmts[i]->tag != Ist_IMark)
      addStmtToIRSB(out, in->stmts[i++]);
   for (; i < in->stmts_used; i++) {
      IRStmt *st = in->stmts[i];
      if (!st || st->tag == Ist_NoOp) continue;
      /* A store's post call follows the statement; everything else precedes it. */
      IRExpr *post_addr = NULL, *post_guard = NULL;
      Int post_size = 0;
      switch (st->tag) {
      case Ist_IMark:
         pending++;
         break;
      case Ist_Exit:
         add_icount(out, &pending);
         break;
      case Ist_WrTmp: {
         IRExpr *e = st->Ist.WrTmp.data;
         if (e->tag == Iex_Load) {
            add_icount(out, &pending);
            add_call(out, CALL_LOAD, e->Iex.Load.addr, sizeofIRType(e->Iex.Load.ty), NULL);
         }
         break;
      }
      case Ist_Store: {
         Int size = sizeofIRType(typeOfIRExpr(in->tyenv, st->Ist.Store.data));
         add_icount(out, &pending);
         add_call(out, CALL_STORE_PRE, st->Ist.Store.addr, size, NULL);
         post_addr = st->Ist.Store.addr;
         post_size = size;
         break;
      }
      case Ist_StoreG: {
         IRStoreG *sg = st->Ist.StoreG.details;
         Int size = sizeofIRType(typeOfIRExpr(in->tyenv, sg->data));
         add_icount(out, &pending);
         add_call(out, CALL_STORE_PRE, sg->addr, size, sg->guard);
         post_addr = sg->addr;
         post_size = size;
         post_guard = sg->guard;
         break;
      }
      case Ist_LoadG: {
         IRLoadG *lg = st->Ist.LoadG.details;
         IRType wide = Ity_INVALID, loaded = Ity_INVALID;
         typeOfIRLoadGOp(lg->cvt, &wide, &loaded);
         add_icount(out, &pending);
         add_call(out, CALL_LOAD, lg->addr, sizeofIRType(loaded), lg->guard);
         break;
      }
      case Ist_Dirty: {
         IRDirty *d = st->Ist.Dirty.details;
         if (d->mFx != Ifx_None) {
            add_icount(out, &pending);
            if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify)
               add_call(out, CALL_LOAD, d->mAddr, d->mSize, NULL);
            if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify) {
               add_call(out, CALL_STORE_PRE, d->mAddr, d->mSize, NULL);
               post_addr = d->mAddr;
               post_size = d->mSize;
            }
         }
         break;
      }
      case Ist_CAS: {
         IRCAS *cas = st->Ist.CAS.details;
         Int size = sizeofIRType(typeOfIRExpr(in->tyenv, cas->dataLo)) * (cas->dataHi ? 2 : 1);
         add_icount(out, &pending);
         add_call(out, CALL_LOAD, cas->addr, size, NULL);
         add_call(out, CALL_STORE_PRE, cas->addr, size, NULL);
         post_addr = cas->addr;
         post_size = size;
         break;
      }
      case Ist_LLSC: {
         add_icount(out, &pending);
         if (st->Ist.LLSC.storedata == NULL) {
            add_call(out, CALL_LOAD, st->Ist.LLSC.addr,
                     sizeofIRType(typeOfIRTemp(in->tyenv, st->Ist.LLSC.result)), NULL);
         } else {
            Int size = sizeofIRType(typeOfIRExpr(in->tyenv, st->Ist.LLSC.storedata));
            add_call(out, CALL_STORE_PRE, st->Ist.LLSC.addr, size, NULL);
            post_addr = st->Ist.LLSC.addr;
            post_size = size;
         }
         break;
      }
      default:
         break;
      }
      addStmtToIRSB(out, st);
      if (post_addr) add_call(out, CALL_STORE_POST, post_addr, post_size, post_guard);
   }
   add_icount(out, &pending);
   return out;
}

/* ---- process events ---- */
static void rec_map(UChar tag, Addr a, SizeT len, UInt flags)
{
   rec_head(tag);
   out_v(a);
   out_v(len);
   out_v(flags);
}

static UInt prot(Bool r, Bool w, Bool x) { return (r ? MAP_R : 0) | (w ? MAP_W : 0) | (x ? MAP_X : 0); }

/* A new mapping; if the client's segment at `a` maps a file, the record also names the file
   (device, inode, the offset of `a` in it, its path), so a simulator can give processes
   mapping the same file pages the same physical pages (shared libraries). */
static void rec_new_map(Addr a, SizeT len, UInt flags)
{
   NSegment const *seg = VG_(am_find_nsegment)(a);
   const HChar *name = NULL;
   if (seg && seg->kind == SkFileC) name = VG_(am_get_filename)(seg);
   if (!name) {
      rec_map(TAG_MAP, a, len, flags);
      return;
   }
   SizeT n = VG_(strlen)(name);
   if (n > MAX_CMDLINE) n = MAX_CMDLINE;
   rec_map(TAG_MAP, a, len, flags | MAP_FILE);
   out_v(seg->dev);
   out_v(seg->ino);
   out_v(seg->offset + (ULong)(a - seg->start));
   out_u16((UShort)n);
   out_bytes(name, (Int)n);
}

static void wm_startup(Addr a, SizeT len, Bool r, Bool w, Bool x, ULong di)
{
   rec_new_map(a, len, prot(r, w, x) | MAP_STARTUP);
}

static void wm_mmap(Addr a, SizeT len, Bool r, Bool w, Bool x, ULong di)
{
   rec_new_map(a, len, prot(r, w, x));
}

static void wm_munmap(Addr a, SizeT len)
{
   cache_drop(a, len);
   rec_map(TAG_UNMAP, a, len, 0);
}

static void wm_brk_grow(Addr a, SizeT len, ThreadId tid)
{
   rec_map(TAG_MAP, a, len, MAP_R | MAP_W | MAP_BRK);
}

static void wm_brk_shrink(Addr a, SizeT len)
{
   cache_drop(a, len);
   rec_map(TAG_UNMAP, a, len, MAP_BRK);
}

static void wm_remap(Addr from, Addr to, SizeT len)
{
   cache_drop(from, len);
   rec_map(TAG_UNMAP, from, len, MAP_REMAP);
   rec_new_map(to, len, MAP_R | MAP_W | MAP_REMAP);
}

static Bool wm_client_request(ThreadId tid, UWord *args, UWord *ret)
{
   if (args[0] != WATTIO_MEM_USERREQ_MARK) return False;
   if (clo_cache) cache_flush();
   rec_head(TAG_MARK);
   out_v(args[1]);
   *ret = 0;
   return True;
}

/* Opens this process's trace file and writes its header. A file of that name already
   there is an earlier image of the same pid (a program that exec'd this one, or the forked
   child that did): this image's file gets a suffix (.1, .2, ...) instead of replacing it. */
static void open_output(void)
{
   HChar *name = VG_(expand_file_name)("--wm-out", clo_out);
   HChar alt[4096];
   SysRes r = VG_(open)(name, VKI_O_CREAT | VKI_O_EXCL | VKI_O_WRONLY, VKI_S_IRUSR | VKI_S_IWUSR);
   for (Int k = 1; sr_isError(r) && k < 1000; k++) {
      VG_(snprintf)(alt, sizeof alt, "%s.%d", name, k);
      r = VG_(open)(alt, VKI_O_CREAT | VKI_O_EXCL | VKI_O_WRONLY, VKI_S_IRUSR | VKI_S_IWUSR);
   }
   if (sr_isError(r)) {
      VG_(umsg)("wattio-mem: cannot create %s\n", name);
      VG_(exit)(1);
   }
   out_fd = (Int)sr_Res(r);
   olen = 0;
   struct vki_timeval tv;
   VG_(gettimeofday)(&tv, NULL);
   HChar cmd[MAX_CMDLINE];
   Int n = 0;
   const HChar *exe = VG_(args_the_exename) ? VG_(args_the_exename) : "";
   n = VG_(snprintf)(cmd, sizeof cmd, "%s", exe);
   for (Word k = 0; VG_(args_for_client) && k < VG_(sizeXA)(VG_(args_for_client)); k++) {
      if (n >= (Int)sizeof cmd - 1) break;
      n += VG_(snprintf)(cmd + n, sizeof cmd - n, " %s", *(HChar **)VG_(indexXA)(VG_(args_for_client), k));
   }
   if (n > (Int)sizeof cmd - 1) n = (Int)sizeof cmd - 1;
   out_bytes("WMEMRAW1", 8);
   out_u32((UInt)VG_(getpid)());
   out_u32((UInt)VG_(getppid)());
   out_u64((ULong)tv.tv_sec * 1000000ULL + (ULong)tv.tv_usec);
   out_u32((UInt)clo_line);
   out_u32((UInt)clo_l1);
   out_u32((UInt)clo_l1_ways);
   out_u32((UInt)clo_l2);
   out_u32((UInt)clo_l2_ways);
   out_u8(clo_cache ? 1 : 0);
   out_u16((UShort)n);
   out_bytes(cmd, n);
}

/* fork: the child gets its own file (named with its own pid); the parent's buffered records
   are written first so they are not duplicated into the child's. If the child then execs a
   traced program, that program's file is the next one of the same pid (open_output). */
static void wm_fork_pre(ThreadId tid) { if (out_fd >= 0) out_flush(); }

static void wm_fork_child(ThreadId tid)
{
   VG_(close)(out_fd);
   open_output();
   last_icount = icount;
   last_addr = 0;
   /* The child's counters and its record window are its own (the limits are per process);
      only the cache contents are inherited, as the memory is. */
   n_access = n_l1_miss = n_fill = n_wb = n_dropped_dirty = 0;
   n_records = n_records_dropped = n_skipped = 0;
}

/* execve replaces the image without calling fini: write back the caches and the buffer
   first (the memory is still there), so the image's trace is complete up to the exec. */
static Bool exit_seen;
static Int exit_status;

static void wm_pre_syscall(ThreadId tid, UInt sysno, UWord *args, UInt nargs)
{
   /* The status fini is handed is not the client's (0 for a `return 3` from main, seen
      on 3.19): take it from exit_group itself. */
   if (sysno == __NR_exit_group) {
      exit_seen = True;
      exit_status = (Int)(args[0] & 0xff);
      return;
   }
   if (sysno != __NR_execve && sysno != __NR_execveat) return;
   if (clo_cache) cache_flush();
   out_flush();
}

static void wm_post_syscall(ThreadId tid, UInt sysno, UWord *args, UInt nargs, SysRes res) {}

/* ---- options, init, exit ---- */
static Bool is_pow2(Long v) { return v > 0 && (v & (v - 1)) == 0; }

static Bool wm_option(const HChar *arg)
{
   if VG_STR_CLO(arg, "--wm-out", clo_out) {}
   else if VG_BOOL_CLO(arg, "--wm-cache", clo_cache) {}
   else if VG_BINT_CLO(arg, "--wm-line", clo_line, 16, 256) {}
   else if VG_BINT_CLO(arg, "--wm-l1-size", clo_l1, 256, 1LL << 30) {}
   else if VG_BINT_CLO(arg, "--wm-l1-ways", clo_l1_ways, 1, 64) {}
   else if VG_BINT_CLO(arg, "--wm-l2-size", clo_l2, 256, 1LL << 30) {}
   else if VG_BINT_CLO(arg, "--wm-l2-ways", clo_l2_ways, 1, 64) {}
   else if VG_BINT_CLO(arg, "--wm-max-records", clo_max_records, 0, 1LL << 62) {}
   else if VG_BINT_CLO(arg, "--wm-skip-records", clo_skip_records, 0, 1LL << 62) {}
   else if VG_BOOL_CLO(arg, "--wm-window-clock", clo_window_clock) {}
   else return False;
   return True;
}

static void wm_usage(void)
{
   VG_(printf)(
      "    --wm-out=FILE          trace file, %%p = pid [wattio-mem.%%p.raw]\n"
      "    --wm-cache=no|yes      model the caches (else record every access) [yes]\n"
      "    --wm-line=N            line size in bytes, power of two 16..256 [64]\n"
      "    --wm-l1-size=N         L1D bytes [32768]     --wm-l1-ways=N  [8]\n"
      "    --wm-l2-size=N         L2 bytes [1048576]    --wm-l2-ways=N  [16]\n"
      "    --wm-max-records=N     stop recording traffic after N records, 0 = never [0]\n"
      "    --wm-skip-records=N    leave out the first N traffic records [0]\n"
      "    --wm-window-clock=no|yes  leave out the left-out records' time too [no]\n");
}

static void wm_debug_usage(void) {}

static void wm_post_clo_init(void)
{
   Long geometry[2][2] = { { clo_l1, clo_l1_ways }, { clo_l2, clo_l2_ways } };
   if (!is_pow2(clo_line)) VG_(fmsg_bad_option)("--wm-line", "must be a power of two\n");
   for (Int l = 0; l < 2; l++) {
      Long sets = geometry[l][0] / (clo_line * geometry[l][1]);
      if (sets < 1 || !is_pow2(sets) || sets * clo_line * geometry[l][1] != geometry[l][0])
         VG_(fmsg_bad_option)(l ? "--wm-l2-size" : "--wm-l1-size",
                              "size / (line * ways) must be a power-of-two number of sets\n");
   }
   if (clo_l2 < clo_l1)
      VG_(fmsg_bad_option)("--wm-l2-size", "the inclusive L2 must be at least as large as L1\n");
   if (clo_cache) cache_init();
   open_output();
}

static void wm_fini(Int exitcode)
{
   if (clo_cache) cache_flush();
   rec_head(TAG_EXIT);
   out_z(exit_seen ? exit_status : exitcode);
   out_v(n_access);
   out_v(n_l1_miss);
   out_v(n_fill);
   out_v(n_wb);
   out_v(n_dropped_dirty);
   out_v(n_records_dropped);
   out_flush();
   VG_(close)(out_fd);
}

static void wm_pre_clo_init(void)
{
   VG_(details_name)("wattio-mem");
   VG_(details_version)("1");
   VG_(details_description)("main-memory traffic after a modelled L1/L2 cache, for wattio");
   VG_(details_copyright_author)("wattio contributors; MIT OR Apache-2.0");
   VG_(details_bug_reports_to)("the wattio repository");
   VG_(basic_tool_funcs)(wm_post_clo_init, wm_instrument, wm_fini);
   VG_(needs_command_line_options)(wm_option, wm_usage, wm_debug_usage);
   VG_(needs_client_requests)(wm_client_request);
   VG_(track_new_mem_startup)(wm_startup);
   VG_(track_new_mem_mmap)(wm_mmap);
   VG_(track_die_mem_munmap)(wm_munmap);
   VG_(track_new_mem_brk)(wm_brk_grow);
   VG_(track_die_mem_brk)(wm_brk_shrink);
   VG_(track_copy_mem_remap)(wm_remap);
   VG_(atfork)(wm_fork_pre, NULL, wm_fork_child);
   VG_(needs_syscall_wrapper)(wm_pre_syscall, wm_post_syscall);
}

VG_DETERMINE_INTERFACE_VERSION(wm_pre_clo_init)
