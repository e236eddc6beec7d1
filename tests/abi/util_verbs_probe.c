/* Differential probe for the self-contained helpers of libibverbs.so.1 (abi/verbs/util_verbs.cc).
 *
 * Prints what the helpers return over tables of inputs, including out-of-range enum values and
 * boundary cases of ibv_read_sysfs_file. util_verbs_diff.sh runs it once against Debian's
 * libibverbs.so.1 and once against ours (LD_LIBRARY_PATH) and requires identical output.
 * Written in C because C, like the library's real callers, may pass any int as an enum.
 * The library that served the run is reported on stderr, not stdout, since it differs. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exported by libibverbs but declared only in rdma-core's uninstalled marshall.h and driver.h. */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

static void fill_pattern(void *p, size_t n, unsigned seed) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed + i * 37u);
}

static void dump(const char *what, const void *p, size_t n) {
  const unsigned char *b = p;
  printf("%s:", what);
  for (size_t i = 0; i < n; i++) printf("%s%02x", i % 32 ? "" : "\n  ", b[i]);
  printf("\n");
}

static void probe_strings(void) {
  for (int i = -3; i <= 40; i++)
    printf("%d wc_status='%s' event='%s' node='%s' port='%s'\n", i, ibv_wc_status_str(i),
           ibv_event_type_str(i), ibv_node_type_str(i), ibv_port_state_str(i));
}

static void probe_rates(void) {
  static const int kMbps[] = {2500,   5000,    10000,  20000, 30000,  40000,  60000,
                              80000,  120000,  14062,  56250, 112500, 168750, 25781,
                              103125, 206250,  309375, 28125, 53125,  425000, 637500,
                              850000, 1275000, 0,      -1,    1,      100000, 50000};

  for (int r = -3; r <= 40; r++)
    printf("rate %d mult=%d mbps=%d\n", r, ibv_rate_to_mult(r), ibv_rate_to_mbps(r));
  for (int m = -3; m <= 600; m++) printf("mult %d rate=%d\n", m, (int)mult_to_ibv_rate(m));
  for (size_t i = 0; i < sizeof(kMbps) / sizeof(kMbps[0]); i++)
    for (int d = -1; d <= 1; d++)
      printf("mbps %d rate=%d\n", kMbps[i] + d, (int)mbps_to_ibv_rate(kMbps[i] + d));
}

static void probe_marshalling(void) {
  struct ib_uverbs_qp_attr kqp;
  struct ib_uverbs_ah_attr kah;
  struct ib_user_path_rec kpath;
  struct ibv_qp_attr qp;
  struct ibv_ah_attr ah;
  struct ibv_sa_path_rec path;

  for (unsigned seed = 1; seed <= 3; seed++) {
    fill_pattern(&kqp, sizeof(kqp), seed);
    memset(&qp, 0xa5, sizeof(qp));
    ibv_copy_qp_attr_from_kern(&qp, &kqp);
    dump("qp_attr_from_kern", &qp, sizeof(qp));

    fill_pattern(&kah, sizeof(kah), seed);
    memset(&ah, 0xa5, sizeof(ah));
    ibv_copy_ah_attr_from_kern(&ah, &kah);
    dump("ah_attr_from_kern", &ah, sizeof(ah));

    fill_pattern(&kpath, sizeof(kpath), seed);
    memset(&path, 0xa5, sizeof(path));
    ibv_copy_path_rec_from_kern(&path, &kpath);
    dump("path_rec_from_kern", &path, sizeof(path));

    fill_pattern(&path, sizeof(path), seed);
    memset(&kpath, 0xa5, sizeof(kpath));
    ibv_copy_path_rec_to_kern(&kpath, &path);
    dump("path_rec_to_kern", &kpath, sizeof(kpath));
  }
}

static void write_file(const char *dir, const char *name, const char *data, size_t len) {
  char path[4096];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "w");
  if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
    perror(path);
    exit(2);
  }
}

static void probe_sysfs(const char *dir) {
  static const struct {
    const char *name;
    size_t bufsize;
  } kCases[] = {
      {"line", 16}, {"line", 5},  {"line", 4}, {"line", 3}, {"noeol", 16},  {"noeol", 5},
      {"noeol", 4}, {"empty", 8}, {"two", 16}, {"two", 6},  {"missing", 8},
  };

  printf("sysfs_path='%s'\n", ibv_get_sysfs_path());
  printf("sysfs_path again='%s'\n", ibv_get_sysfs_path());

  write_file(dir, "line", "abc\n", 4);
  write_file(dir, "noeol", "abcd", 4);
  write_file(dir, "empty", "", 0);
  write_file(dir, "two", "a\nb\n\n", 5);
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); i++) {
    char buf[32];
    int ret;

    memset(buf, 'Z', sizeof(buf));
    errno = 0;
    ret = ibv_read_sysfs_file(dir, kCases[i].name, buf, kCases[i].bufsize);
    printf("read %s size=%zu ret=%d errno=%d", kCases[i].name, kCases[i].bufsize, ret,
           ret < 0 ? errno : 0);
    dump(" buf", buf, 8);
  }
}

static void probe_fork_ranges(void) {
  long page = sysconf(_SC_PAGESIZE);
  void *buf = aligned_alloc((size_t)page, (size_t)page * 4);

  printf("dontfork=%d dofork=%d dontfork(NULL,0)=%d\n", ibv_dontfork_range(buf, (size_t)page * 4),
         ibv_dofork_range(buf, (size_t)page * 4), ibv_dontfork_range(NULL, 0));
  free(buf);
}

int main(int argc, char **argv) {
  Dl_info info;

  if (argc != 2) {
    fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  if (dladdr((void *)ibv_wc_status_str, &info) && info.dli_fname)
    fprintf(stderr, "libibverbs: %s\n", info.dli_fname);

  probe_strings();
  probe_rates();
  probe_marshalling();
  probe_sysfs(argv[1]);
  probe_fork_ranges();
  return 0;
}
