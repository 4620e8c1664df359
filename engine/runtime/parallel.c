/* Parallel runtime of Schedule Explorer's LLVM backend.
 *
 * Compiled once with the system C compiler (cc -O2 -shared -fPIC -pthread) into the
 * engine's cache directory and loaded into the process; LLVM-compiled kernels call
 * engine_parallel_launch() for every `parallel` loop, passing an outlined body
 *     int body(int task_id, int num_tasks, void *env)
 * which runs its share (a contiguous chunk) of the loop's iterations.
 *
 * Design:
 *  - a pool of (max_threads - 1) worker threads plus the launching thread;
 *  - a launch splits the loop into num_tasks chunks (about 4 per thread, at most the loop
 *    extent) and publishes them in one 64-bit word (generation | num_tasks | next task);
 *    every thread, the launcher included, claims chunks with compare-and-swap until none
 *    is left. So the work never waits for a thread the OS has not scheduled (on a busy
 *    machine the launcher simply runs more chunks itself), and a slow worker can never
 *    claim a chunk of a later job (the generation must match);
 *  - idle workers spin briefly (low latency for back-to-back launches), then sleep on a
 *    condition variable (no CPU burnt while Python is idle);
 *  - nested parallel loops (a launch from inside a task) and concurrent launches from
 *    several Python threads never deadlock: such a launch runs all its work serially in
 *    the calling thread (num_tasks = 1);
 *  - the first non-zero return code of any task is returned to the caller.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 256
#define SPIN_ITERS 20000
#define TASKS_PER_THREAD 4

typedef int (*engine_task_fn)(int task_id, int num_tasks, void *env);

static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static int pool_size = 0;        /* threads including the launcher; 0 = not started */
static int requested_threads = 0; /* 0: not asked (a library exported by engine.deploy) */
static int atfork_registered = 0;
static int active_threads = 1;   /* tasks per launch (<= pool_size) */
static pthread_t workers[MAX_THREADS];

static engine_task_fn job_fn;
static void *job_env;
static atomic_int job_error;
static _Atomic uint64_t claim_word;   /* generation:32 | num_tasks:16 | next_task:16 */
static atomic_long generation;
static atomic_int tasks_done;
static int sleeping = 0;

static _Thread_local int in_task = 0;        /* nested launches run serially */
static _Thread_local int thread_index = 0;   /* 0 = launcher/main, 1..n-1 workers */

/* statistics (for tests and benchmarks) */
static atomic_long stat_launches;
static atomic_long stat_serial_launches;
static atomic_long stat_tasks_run[MAX_THREADS];

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claim and run chunks of job `gen` until none is left. */
static void run_chunks(uint32_t gen) {
    for (;;) {
        uint64_t s = atomic_load_explicit(&claim_word, memory_order_acquire);
        uint32_t g = (uint32_t)(s >> 32);
        uint32_t ntasks = (uint32_t)((s >> 16) & 0xffff);
        uint32_t next = (uint32_t)(s & 0xffff);
        if (g != gen || next >= ntasks) return;
        if (!atomic_compare_exchange_weak_explicit(&claim_word, &s, s + 1,
                                                   memory_order_acq_rel, memory_order_relaxed))
            continue;
        /* the job cannot finish before this chunk does, so its fields are still ours */
        int rc = job_fn((int)next, (int)ntasks, job_env);
        if (rc != 0) {
            int zero = 0;
            atomic_compare_exchange_strong(&job_error, &zero, rc);
        }
        atomic_fetch_add(&stat_tasks_run[thread_index], 1);
        atomic_fetch_add_explicit(&tasks_done, 1, memory_order_acq_rel);
    }
}

static void *worker_main(void *arg) {
    int me = (int)(intptr_t)arg;
    thread_index = me;
    in_task = 1;
    long seen = atomic_load(&generation);
    for (;;) {
        long g;
        int spins = 0;
        while ((g = atomic_load_explicit(&generation, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&sleep_lock);
            sleeping++;
            while ((g = atomic_load(&generation)) == seen)
                pthread_cond_wait(&sleep_cond, &sleep_lock);
            sleeping--;
            pthread_mutex_unlock(&sleep_lock);
            break;
        }
        seen = g;
        if (me < active_threads) run_chunks((uint32_t)g);
    }
    return NULL;
}

/* In a child created by fork() the workers do not exist: reset the pool so that the first
   launch in the child starts a fresh one (and no lock is left held by a vanished thread). */
static void atfork_child(void) {
    pthread_mutex_init(&launch_lock, NULL);
    pthread_mutex_init(&sleep_lock, NULL);
    pthread_mutex_init(&init_lock, NULL);
    pthread_cond_init(&sleep_cond, NULL);
    sleeping = 0;
    pool_size = 0;
    active_threads = 1;
    in_task = 0;
}

/* The pool size when nobody asked for one (a library exported by engine.deploy, whose first
   parallel launch starts the pool): $ENGINE_NUM_THREADS if it is a positive number, else the
   online processors. */
static int default_threads(void) {
    const char *env = getenv("ENGINE_NUM_THREADS");
    if (env != NULL) {
        int n = atoi(env);
        if (n >= 1) return n;
    }
#ifdef _SC_NPROCESSORS_ONLN
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus >= 1) return (int)cpus;
#endif
    return 1;
}

/* Start the pool with n threads in total (n-1 workers; n < 1: default_threads()).
   Idempotent; returns pool size. */
int engine_parallel_init(int n) {
    pthread_mutex_lock(&init_lock);
    if (!atfork_registered) {
        pthread_atfork(NULL, NULL, atfork_child);
        atfork_registered = 1;
    }
    if (pool_size == 0) {
        requested_threads = n;
        if (n < 1) n = default_threads();
        if (n > MAX_THREADS) n = MAX_THREADS;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 16u << 20); /* room for stack-allocated buffers */
        int started = 1;
        for (int i = 1; i < n; i++) {
            if (pthread_create(&workers[i], &attr, worker_main, (void *)(intptr_t)i) != 0)
                break;
            pthread_detach(workers[i]);
            started++;
        }
        pthread_attr_destroy(&attr);
        pool_size = started;
        active_threads = started;
    }
    int out = pool_size;
    pthread_mutex_unlock(&init_lock);
    return out;
}

/* Number of tasks used by the next launches (clamped to [1, pool size]). */
int engine_parallel_set_num_threads(int n) {
    if (pool_size == 0) engine_parallel_init(requested_threads);
    pthread_mutex_lock(&launch_lock);
    if (n < 1) n = 1;
    if (n > pool_size) n = pool_size;
    active_threads = n;
    pthread_mutex_unlock(&launch_lock);
    return n;
}

int engine_parallel_num_threads(void) { return active_threads; }

/* Index of the calling thread inside the pool: 0 for the launcher, 1..n-1 for workers. */
int engine_runtime_thread_index(void) { return thread_index; }

int engine_parallel_launch(engine_task_fn fn, void *env, int extent_hint) {
    if (pool_size == 0) engine_parallel_init(requested_threads);
    if (in_task || active_threads <= 1 || pthread_mutex_trylock(&launch_lock) != 0) {
        /* nested, single-threaded, or another thread is launching: run serially here */
        atomic_fetch_add(&stat_serial_launches, 1);
        int saved = in_task;
        in_task = 1;
        int rc = fn(0, 1, env);
        atomic_fetch_add(&stat_tasks_run[thread_index], 1);
        in_task = saved;
        return rc;
    }
    atomic_fetch_add(&stat_launches, 1);
    int ntasks = active_threads * TASKS_PER_THREAD;
    if (extent_hint > 0 && extent_hint < ntasks) ntasks = extent_hint;
    if (ntasks > 0xffff) ntasks = 0xffff;
    job_fn = fn;
    job_env = env;
    atomic_store(&job_error, 0);
    atomic_store(&tasks_done, 0);
    uint32_t gen = (uint32_t)(atomic_load(&generation) + 1);
    atomic_store_explicit(&claim_word, ((uint64_t)gen << 32) | ((uint64_t)ntasks << 16),
                          memory_order_release);
    atomic_store_explicit(&generation, (long)gen, memory_order_release);
    pthread_mutex_lock(&sleep_lock);
    if (sleeping > 0) pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);

    in_task = 1;
    run_chunks(gen);
    in_task = 0;
    int spins = 0;
    while (atomic_load_explicit(&tasks_done, memory_order_acquire) < ntasks) {
        if (++spins < SPIN_ITERS) cpu_relax();
        else sched_yield();
    }
    int rc = atomic_load(&job_error);
    pthread_mutex_unlock(&launch_lock);
    return rc;
}

/* stats[0] = launches, stats[1] = serial launches, stats[2 + t] = tasks run by thread t. */
int engine_parallel_stats(long *out, int n) {
    if (n > 0) out[0] = atomic_load(&stat_launches);
    if (n > 1) out[1] = atomic_load(&stat_serial_launches);
    for (int t = 0; t + 2 < n && t < MAX_THREADS; t++) out[2 + t] = atomic_load(&stat_tasks_run[t]);
    return pool_size;
}

/* Empty task used by the launch-overhead benchmark. */
static int empty_task(int task, int ntasks, void *env) {
    (void)task; (void)ntasks; (void)env;
    return 0;
}

/* Launch `count` empty jobs back to back (measures pure launch overhead). */
int engine_parallel_bench_empty(int count) {
    int rc = 0;
    for (int i = 0; i < count; i++) rc |= engine_parallel_launch(empty_task, NULL, 0);
    return rc;
}
