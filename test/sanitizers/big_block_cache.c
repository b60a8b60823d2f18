// LD_PRELOAD'ed into the ASan/UBSan suite only (.ci/run builds it, without sanitizers, in C so
// that it pulls no libstdc++ in ahead of the ASan runtime): keeps freed posix_memalign blocks of
// 128 KiB and more for reuse instead of handing them back to ASan's allocator.
//
// Why: lavapipe (Mesa 22.3) allocates the coroutine frames of every compute workgroup it runs
// with posix_memalign and frees them when the workgroup ends. Ours come to 150-360 KiB, above
// ASan's largest size class (128 KiB), so under ASan each workgroup mmapped fresh memory, faulted
// its pages in and unmapped it again: in one forward test 1.5 million page faults, about half of
// the process's time in the kernel; the GPU suite took ~19 of the ASan run's ~23 minutes.
// Nothing in this project calls posix_memalign (its aligned allocations are aligned_alloc and
// aligned operator new, which this leaves alone), so only the driver's blocks are kept; ASan
// still checks every other allocation.
//
// A block is reused only for the same size and alignment (the driver asks for a few fixed shapes
// again and again). free() asks ASan for a block's size (malloc_usable_size) only after the first
// big block (it is called during start-up, before ASan can answer) and looks it up only when it
// is big. Blocks still cached at exit are reachable from here, so LeakSanitizer does not report
// them.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

enum { kLiveSlots = 1024, kFreeSlots = 64 };  // blocks handed out / kept for reuse
static const size_t kMinCached = (size_t)128 << 10;

struct block {
  void* p;
  size_t size;
  size_t align;
};

// ASan's own entry points (libasan exports them beside the interposing names), bound by the
// dynamic linker (dlsym would call free() while this free() is being resolved). Weak: a process
// without ASan that inherits LD_PRELOAD (a test's python3 child) gets glibc's instead.
void __interceptor_free(void* p) __attribute__((weak));
int __interceptor_posix_memalign(void** out, size_t align, size_t size) __attribute__((weak));
size_t __interceptor_malloc_usable_size(void* p) __attribute__((weak));
void __libc_free(void* p);
void* __libc_memalign(size_t align, size_t size);

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct block g_live[kLiveSlots];
static struct block g_free[kFreeSlots];
static int g_n_free;
static volatile int g_any;  // a big block was handed out

// Records p as handed out (under g_mutex); 0 when the table is full (then it is not cached).
static int add_live(void* p, size_t size, size_t align) {
  for (int i = 0; i < kLiveSlots; ++i) {
    if (g_live[i].p == NULL) {
      g_live[i].p = p;
      g_live[i].size = size;
      g_live[i].align = align;
      return 1;
    }
  }
  return 0;
}

int posix_memalign(void** out, size_t align, size_t size) {
  if (__interceptor_posix_memalign == NULL) {  // no ASan here: glibc's, with its checks
    if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
    void* p = __libc_memalign(align, size);
    if (p == NULL) return ENOMEM;
    *out = p;
    return 0;
  }
  if (size < kMinCached) return __interceptor_posix_memalign(out, align, size);
  pthread_mutex_lock(&g_mutex);
  for (int i = 0; i < g_n_free; ++i) {
    if (g_free[i].size == size && g_free[i].align == align && add_live(g_free[i].p, size, align)) {
      *out = g_free[i].p;
      g_free[i] = g_free[--g_n_free];
      pthread_mutex_unlock(&g_mutex);
      return 0;
    }
  }
  pthread_mutex_unlock(&g_mutex);
  void* p = NULL;
  const int r = __interceptor_posix_memalign(&p, align, size);
  if (r != 0) return r;
  pthread_mutex_lock(&g_mutex);
  add_live(p, size, align);  // a full table leaves the block to ASan's free
  g_any = 1;
  pthread_mutex_unlock(&g_mutex);
  *out = p;
  return 0;
}

void free(void* p) {
  if (__interceptor_free == NULL) {  // no ASan here
    __libc_free(p);
    return;
  }
  if (p == NULL || !g_any || __interceptor_malloc_usable_size(p) < kMinCached) {
    __interceptor_free(p);
    return;
  }
  void* evict = p;  // what goes back to ASan: p itself unless it is ours
  pthread_mutex_lock(&g_mutex);
  for (int i = 0; i < kLiveSlots; ++i) {
    if (g_live[i].p != p) continue;
    const struct block kept = g_live[i];
    g_live[i].p = NULL;
    evict = NULL;
    if (g_n_free == kFreeSlots) {  // full: one cached block goes back to ASan
      evict = g_free[0].p;
      g_free[0] = g_free[--g_n_free];
    }
    g_free[g_n_free++] = kept;
    break;
  }
  pthread_mutex_unlock(&g_mutex);
  if (evict != NULL) __interceptor_free(evict);
}
