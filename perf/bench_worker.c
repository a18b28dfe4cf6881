/*
 * worker-roundtrip: a client (pinned to CPU 0) sends a 64-byte job to a
 * worker process (pinned to CPU 1), which echoes it back as the result.
 *
 *   shmsched   shms_submit -> shms_worker_take -> shms_worker_complete ->
 *              shms_wait_result, on a worker class of one cell
 *   posix-mq   a request queue and a reply queue: mq_send -> mq_receive ->
 *              mq_send -> mq_receive
 *
 * Latency: one job in flight at a time, --rounds jobs after a warm-up;
 * p50_ns and p99_ns of submit-to-result. Throughput, each for --ms: one job in
 * flight (ops_per_s_1: the next job is submitted when the last result is in),
 * and --depth jobs kept in flight (ops_per_s; at most 8: a message queue holds
 * 10), where the client and the worker can overlap.
 *
 * Output: `worker-roundtrip,SYSTEM,{p50_ns,p99_ns,ops_per_s_1,ops_per_s},V,UNIT`.
 * Usage: bench_worker --system shmsched|posix-mq [--rounds N] [--ms MS] [--depth D]
 *                     [--samples FILE]
 */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "shmsched.h"

#define PAYLOAD   64
#define MAX_DEPTH 8

/* One system's client and worker ends. */
struct rt {
  const char *system;
  /* shmsched */
  char segment[64];
  shms_t *h;
  shms_ticket tickets[MAX_DEPTH];
  /* posix-mq: requests to the worker, replies to the client */
  mqd_t req, rep;
};

static const char quit_payload[PAYLOAD] = "quit";

/* ---- shmsched ----------------------------------------------------------- */

static void shms_setup(struct rt *rt) {
  snprintf(rt->segment, sizeof rt->segment, "shms-bench-worker-%d", (int)getpid());
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 16, .mode = SHMS_MODE_WORKER, .payload = 256};
  int rc = shms_create(rt->segment, &cfg);
  if (rc != SHMS_OK)
    bu_die_shms("shms_create", rc);
}

static void shms_worker_loop(struct rt *rt) {
  shms_t *h;
  shms_worker_t *w;
  int rc = shms_attach(rt->segment, 0, &h);
  if (rc != SHMS_OK || (rc = shms_worker_open(h, SHMS_CLASS_SMALL, &w)) != SHMS_OK)
    bu_die_shms("worker attach/open", rc);
  for (;;) {
    shms_job job;
    if ((rc = shms_worker_take(w, UINT64_MAX, &job)) != SHMS_OK)
      bu_die_shms("shms_worker_take", rc);
    int quit = job.payload_len == PAYLOAD && memcmp(job.payload, quit_payload, PAYLOAD) == 0;
    if ((rc = shms_worker_complete(w, &job, 0, job.payload, job.payload_len)) != SHMS_OK)
      bu_die_shms("shms_worker_complete", rc);
    if (quit)
      break;
  }
  shms_worker_close(w);
  shms_detach(h);
}

static void shms_client_open(struct rt *rt) {
  int rc = shms_attach(rt->segment, 0, &rt->h);
  if (rc != SHMS_OK)
    bu_die_shms("shms_attach", rc);
}

static void shms_send(struct rt *rt, int k, const char *payload) {
  shms_request req = {.cls = SHMS_CLASS_SMALL, .tenant = "client"};
  int rc = shms_submit(rt->h, &req, payload, PAYLOAD, 0, &rt->tickets[k]);
  if (rc != SHMS_OK)
    bu_die_shms("shms_submit", rc);
}

static void shms_recv(struct rt *rt, int k) {
  char buf[256];
  shms_result res;
  int rc = shms_wait_result(rt->h, &rt->tickets[k], UINT64_MAX, buf, sizeof buf, &res);
  if (rc != SHMS_OK || res.result_len != PAYLOAD)
    bu_die_shms("shms_wait_result", rc);
}

static void shms_teardown(struct rt *rt) {
  shms_detach(rt->h);
  shms_destroy(rt->segment, SHMS_DESTROY_FORCE);
}

/* ---- posix-mq ----------------------------------------------------------- */

static mqd_t mq_make(const char *tag) {
  char name[64];
  snprintf(name, sizeof name, "/shms-bench-%s-%d", tag, (int)getpid());
  struct mq_attr attr = {.mq_maxmsg = 10, .mq_msgsize = PAYLOAD};
  mqd_t q = mq_open(name, O_CREAT | O_EXCL | O_RDWR, 0600, &attr);
  if (q == (mqd_t)-1)
    bu_die("mq_open %s: %s", name, strerror(errno));
  mq_unlink(name); /* the descriptors (inherited by the worker) keep it alive */
  return q;
}

static void mq_setup(struct rt *rt) {
  rt->req = mq_make("req");
  rt->rep = mq_make("rep");
}

static void mq_put(mqd_t q, const char *buf) {
  while (mq_send(q, buf, PAYLOAD, 0) != 0)
    if (errno != EINTR)
      bu_die("mq_send: %s", strerror(errno));
}

static void mq_get(mqd_t q, char *buf) {
  while (mq_receive(q, buf, PAYLOAD, NULL) != PAYLOAD)
    if (errno != EINTR)
      bu_die("mq_receive: %s", strerror(errno));
}

static void mq_worker_loop(struct rt *rt) {
  char buf[PAYLOAD];
  do {
    mq_get(rt->req, buf);
    mq_put(rt->rep, buf);
  } while (memcmp(buf, quit_payload, PAYLOAD) != 0);
}

/* ---- the client --------------------------------------------------------- */

static int is_shms(const struct rt *rt) { return strcmp(rt->system, "shmsched") == 0; }

static void send_job(struct rt *rt, int k, const char *payload) {
  if (is_shms(rt))
    shms_send(rt, k, payload);
  else
    mq_put(rt->req, payload);
}

static void recv_job(struct rt *rt, int k) {
  char buf[PAYLOAD];
  if (is_shms(rt))
    shms_recv(rt, k);
  else
    mq_get(rt->rep, buf);
}

/* One job in flight: the latency of each round trip into lat[0..rounds). */
static void latency(struct rt *rt, uint64_t *lat, long rounds) {
  char payload[PAYLOAD] = "job";
  for (long r = -rounds / 10; r < rounds; r++) { /* the first tenth warms up */
    uint64_t t0 = bu_now_ns();
    send_job(rt, 0, payload);
    recv_job(rt, 0);
    if (r >= 0)
      lat[r] = bu_now_ns() - t0;
  }
}

/* depth jobs in flight for ms milliseconds: completed jobs per second. */
static double throughput(struct rt *rt, int depth, long ms) {
  char payload[PAYLOAD] = "job";
  for (int k = 0; k < depth; k++)
    send_job(rt, k, payload);
  uint64_t n = 0, t0 = bu_now_ns(), end = t0 + (uint64_t)ms * 1000000ull;
  int k = 0;
  while (bu_now_ns() < end) {
    recv_job(rt, k); /* results come back in submission order: one worker, one tenant */
    send_job(rt, k, payload);
    k = (k + 1) % depth;
    n++;
  }
  uint64_t dt = bu_now_ns() - t0;
  for (int i = 0; i < depth; i++, k = (k + 1) % depth)
    recv_job(rt, k);
  return (double)n * 1e9 / (double)dt;
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv,
               "--system shmsched|posix-mq [--rounds N] [--ms MS] [--depth D] [--samples FILE]");
  struct rt rt = {.system = bu_arg_str("system", "shmsched")};
  long rounds = bu_arg_long("rounds", 2000), ms = bu_arg_long("ms", 500);
  int depth = (int)bu_arg_long("depth", 4);
  const char *samples = bu_arg_str("samples", NULL);
  bu_args_done();
  if ((!is_shms(&rt) && strcmp(rt.system, "posix-mq") != 0) || rounds < 10 || depth < 1 ||
      depth > MAX_DEPTH)
    bu_die("--system is shmsched or posix-mq, --rounds at least 10, --depth 1..%d", MAX_DEPTH);

  is_shms(&rt) ? shms_setup(&rt) : mq_setup(&rt);
  pid_t pid = fork();
  if (pid < 0)
    bu_die("fork failed");
  if (pid == 0) {
    bu_pin(1);
    is_shms(&rt) ? shms_worker_loop(&rt) : mq_worker_loop(&rt);
    _exit(0);
  }
  bu_pin(0);
  if (is_shms(&rt))
    shms_client_open(&rt);
  uint64_t *lat = bu_shared(sizeof(uint64_t) * (size_t)rounds);
  latency(&rt, lat, rounds);
  double ops1 = throughput(&rt, 1, ms), ops = throughput(&rt, depth, ms);
  send_job(&rt, 0, quit_payload);
  recv_job(&rt, 0);
  int status;
  waitpid(pid, &status, 0);
  if (is_shms(&rt))
    shms_teardown(&rt);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    bu_die("the worker failed");
  if (samples)
    bu_write_samples(samples, lat, (size_t)rounds);
  bu_row("worker-roundtrip", rt.system, "p50_ns", (double)bu_quantile(lat, (size_t)rounds, 0.50),
         "ns");
  bu_row("worker-roundtrip", rt.system, "p99_ns", (double)bu_quantile(lat, (size_t)rounds, 0.99),
         "ns");
  bu_row("worker-roundtrip", rt.system, "ops_per_s_1", (double)(uint64_t)ops1, "ops/s");
  bu_row("worker-roundtrip", rt.system, "ops_per_s", (double)(uint64_t)ops, "ops/s");
  return 0;
}
