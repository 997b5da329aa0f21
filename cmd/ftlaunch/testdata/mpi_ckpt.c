/* mpi_ckpt DIR STEPS [SLEEP_MS]: an application-level checkpoint/restart
   program, for `ftlaunch run --restart job`.

   Every rank holds a value; each step every rank contributes a mix of its
   value to an MPI_Allreduce (sum) and mixes the sum back in, then sleeps
   SLEEP_MS (default 0). Every CKPT_EVERY steps each rank writes its step
   and value to DIR/rank-R (a temporary file renamed over it), keeping the
   checkpoint before in the same file: a rank killed between the allreduce
   and its write is one checkpoint behind the others, never more.

   At start each rank reads DIR/rank-R; the ranks agree on the restart step
   with an MPI_Allreduce MIN of their latest checkpoint steps, and check
   with an MPI_Allreduce LAND that every rank holds that step (its latest
   or the one before); if not they all start from step 0.

   Rank 0 prints "steps S checksum C expected E" on stdout, where E is
   computed in one process by simulating every rank; exit 0 iff C == E.
   On stderr rank 0 prints "restarted from step K" when the ranks resumed
   from a checkpoint (or FTLAUNCH_RESTARTS says the job was started again),
   with FTLAUNCH_RESTARTS=N appended when that variable is set. */
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_EVERY 5

static uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
static uint64_t initial(int rank) { return splitmix(0x6d70695f636b7074ULL ^ (uint64_t)(rank + 1)); }
static uint64_t contrib(int rank, int step, uint64_t v) { return splitmix(v ^ ((uint64_t)step << 32) ^ (uint64_t)rank); }
static uint64_t next(int rank, int step, uint64_t v, uint64_t sum) { return splitmix(v + splitmix(sum ^ (uint64_t)step) + (uint64_t)rank); }
static uint64_t fold(const uint64_t *vs, int n) {
  uint64_t c = (uint64_t)n;
  for (int r = 0; r < n; r++) c = splitmix(c ^ vs[r]);
  return c;
}

/* expected simulates every rank for steps steps and folds the values. */
static uint64_t expected(int size, int steps) {
  uint64_t *v = malloc(sizeof *v * size);
  if (!v) { perror("malloc"); exit(1); }
  for (int r = 0; r < size; r++) v[r] = initial(r);
  for (int s = 1; s <= steps; s++) {
    uint64_t sum = 0;
    for (int r = 0; r < size; r++) sum += contrib(r, s, v[r]);
    for (int r = 0; r < size; r++) v[r] = next(r, s, v[r], sum);
  }
  uint64_t c = fold(v, size);
  free(v);
  return c;
}

struct ckpt { int step, prev; uint64_t value, pvalue; };

static void ckpt_path(char *buf, size_t n, const char *dir, int rank, const char *suffix) {
  snprintf(buf, n, "%s/rank-%d%s", dir, rank, suffix);
}

/* ckpt_read reads this rank's checkpoint; a missing, malformed or foreign
   (another size) one reads as step 0. */
static struct ckpt ckpt_read(const char *dir, int rank, int size) {
  struct ckpt c = {0, 0, 0, 0};
  char path[4096];
  ckpt_path(path, sizeof path, dir, rank, "");
  FILE *f = fopen(path, "r");
  if (!f) return c;
  int sz, rk, step, prev;
  uint64_t v, pv;
  if (fscanf(f, "mpi_ckpt size %d rank %d step %d value %" SCNx64 " prev %d value %" SCNx64, &sz, &rk, &step, &v, &prev, &pv) == 6 &&
      sz == size && rk == rank && step > 0 && prev >= 0 && prev < step) {
    c.step = step; c.value = v; c.prev = prev; c.pvalue = pv;
  } else {
    fprintf(stderr, "mpi_ckpt rank %d: %s is not a checkpoint of this job: ignored\n", rank, path);
  }
  fclose(f);
  return c;
}

/* ckpt_write makes (step, v) this rank's latest checkpoint, the old latest
   its previous one; atomically (rename). */
static void ckpt_write(const char *dir, int rank, int size, struct ckpt *c, int step, uint64_t v) {
  char tmp[4096], path[4096];
  ckpt_path(tmp, sizeof tmp, dir, rank, ".tmp");
  ckpt_path(path, sizeof path, dir, rank, "");
  FILE *f = fopen(tmp, "w");
  if (!f) { fprintf(stderr, "mpi_ckpt rank %d: %s: %s\n", rank, tmp, strerror(errno)); MPI_Abort(MPI_COMM_WORLD, 1); }
  fprintf(f, "mpi_ckpt size %d rank %d step %d value %016" PRIx64 " prev %d value %016" PRIx64 "\n", size, rank, step, v, c->step, c->value);
  if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
    fprintf(stderr, "mpi_ckpt rank %d: write %s: %s\n", rank, path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  c->prev = c->step; c->pvalue = c->value; c->step = step; c->value = v;
}

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3 || argc > 4 || atoi(argv[2]) < 0) {
    if (rank == 0) fprintf(stderr, "usage: mpi_ckpt DIR STEPS [SLEEP_MS]\n");
    MPI_Finalize();
    return 2;
  }
  const char *dir = argv[1];
  int steps = atoi(argv[2]), sleep_ms = argc > 3 ? atoi(argv[3]) : 0;
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "mpi_ckpt rank %d: mkdir %s: %s\n", rank, dir, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  /* Agree on the restart step. */
  struct ckpt c = ckpt_read(dir, rank, size);
  if (c.step > steps) c = (struct ckpt){0, 0, 0, 0}; /* a longer run's: start again */
  int start = 0, have, all;
  MPI_Allreduce(&c.step, &start, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  have = start == 0 || start == c.step || start == c.prev;
  MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!all) {
    if (rank == 0) fprintf(stderr, "mpi_ckpt: not every rank holds step %d: starting from step 0\n", start);
    start = 0;
  }
  uint64_t v = initial(rank);
  if (start == 0) {
    c = (struct ckpt){0, 0, 0, 0};
  } else if (start == c.step) {
    v = c.value;
  } else { /* one checkpoint ahead: forget it, the run redoes that step */
    v = c.pvalue;
    c = (struct ckpt){c.prev, 0, c.pvalue, 0};
  }
  const char *restarts = getenv("FTLAUNCH_RESTARTS");
  if (rank == 0 && (start > 0 || (restarts && atoi(restarts) > 0))) {
    if (restarts) fprintf(stderr, "restarted from step %d (FTLAUNCH_RESTARTS=%s)\n", start, restarts);
    else fprintf(stderr, "restarted from step %d\n", start);
  }

  for (int s = start + 1; s <= steps; s++) {
    uint64_t mine = contrib(rank, s, v), sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    v = next(rank, s, v, sum);
    if (sleep_ms > 0) usleep((useconds_t)sleep_ms * 1000);
    if (s % CKPT_EVERY == 0) ckpt_write(dir, rank, size, &c, s, v);
  }

  uint64_t *all_v = rank == 0 ? malloc(sizeof *all_v * size) : NULL;
  if (rank == 0 && !all_v) { perror("malloc"); MPI_Abort(MPI_COMM_WORLD, 1); }
  MPI_Gather(&v, 1, MPI_UINT64_T, all_v, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  int ok = 1;
  if (rank == 0) {
    uint64_t got = fold(all_v, size), want = expected(size, steps);
    printf("steps %d checksum %016" PRIx64 " expected %016" PRIx64 "\n", steps, got, want);
    fflush(stdout);
    ok = got == want;
    free(all_v);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return ok ? 0 : 1;
}
