/* Parallel runtime of Schedule Explorer's LLVM backend.
 *
 * Compiled once with the system C compiler (cc -O2 -shared -fPIC -pthread) into the
 * engine's cache directory and loaded into the process; LLVM-compiled kernels call
 * engine_parallel_launch() for every `parallel` loop, passing an outlined body
 *     int body(int task_id, int num_tasks, void *env)
 * which runs its share (a contiguous chunk) of the loop's iterations.
 *
 * Design:
 *  - a pool of (max_threads - 1) worker threads; the launching thread runs task 0
 *    itself, worker w runs task w (static assignment: deterministic, like OpenMP's
 *    static schedule and TVM's runtime);
 *  - a launch publishes the job and bumps a generation counter; workers spin briefly
 *    (low latency for back-to-back launches) and then sleep on a condition variable
 *    (no CPU burnt while Python is idle);
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

#define MAX_THREADS 256
#define SPIN_ITERS 20000

typedef int (*engine_task_fn)(int task_id, int num_tasks, void *env);

static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static int pool_size = 0;        /* threads including the launcher; 0 = not started */
static int active_threads = 1;   /* tasks per launch (<= pool_size) */
static pthread_t workers[MAX_THREADS];

static engine_task_fn job_fn;
static void *job_env;
static int job_tasks;
static atomic_int job_error;
static atomic_long generation;
static atomic_int remaining;
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

static void run_task(int task) {
    int rc = job_fn(task, job_tasks, job_env);
    if (rc != 0) {
        int zero = 0;
        atomic_compare_exchange_strong(&job_error, &zero, rc);
    }
    atomic_fetch_add(&stat_tasks_run[thread_index], 1);
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
        /* every worker acknowledges every generation (so none can lag behind and
           confuse two jobs); only the first job_tasks threads run a task */
        if (me < job_tasks) run_task(me);
        atomic_fetch_sub_explicit(&remaining, 1, memory_order_release);
    }
    return NULL;
}

/* Start the pool with n threads in total (n-1 workers). Idempotent; returns pool size. */
int engine_parallel_init(int n) {
    pthread_mutex_lock(&init_lock);
    if (pool_size == 0) {
        if (n < 1) n = 1;
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

int engine_parallel_launch(engine_task_fn fn, void *env, int num_tasks_hint) {
    (void)num_tasks_hint;
    if (pool_size == 0) engine_parallel_init(1);
    if (in_task || active_threads <= 1 || pthread_mutex_trylock(&launch_lock) != 0) {
        /* nested, single-threaded, or another thread is launching: run serially here */
        atomic_fetch_add(&stat_serial_launches, 1);
        int saved = in_task;
        in_task = 1;
        int rc = fn(0, 1, env);
        in_task = saved;
        return rc;
    }
    atomic_fetch_add(&stat_launches, 1);
    job_fn = fn;
    job_env = env;
    job_tasks = active_threads;
    atomic_store(&job_error, 0);
    atomic_store(&remaining, pool_size - 1);
    atomic_fetch_add_explicit(&generation, 1, memory_order_release);
    pthread_mutex_lock(&sleep_lock);
    if (sleeping > 0) pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);

    in_task = 1;
    run_task(0);
    in_task = 0;
    int spins = 0;
    while (atomic_load_explicit(&remaining, memory_order_acquire) > 0) {
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
