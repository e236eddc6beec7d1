/* quota_probe: what an application sees of its container's quotas, through the verbs API
 * only (Debian's libibverbs, ours injected). Opens the first device and:
 *   quota_probe qp N      creates RC QPs until one fails (at most N + 8); prints
 *                         "qps CREATED errno NAME", then destroys one and creates it again
 *                         ("recreate ok" or "recreate errno NAME").
 *   quota_probe mr BYTES  registers BYTES-long MRs until one fails (at most 64); prints
 *                         "mrs CREATED errno NAME".
 * Exit status 0 when it got that far, 1 on an unexpected failure. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* errno_name(int e) {
  switch (e) {
    case 0: return "none";
    case EDQUOT: return "EDQUOT";
    case ENOMEM: return "ENOMEM";
    case EAGAIN: return "EAGAIN";
    case EINVAL: return "EINVAL";
    default: return strerror(e);
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: quota_probe qp N | mr BYTES\n");
    return 2;
  }
  const long n = atol(argv[2]);
  struct ibv_device** devs = ibv_get_device_list(NULL);
  if (devs == NULL || devs[0] == NULL) {
    fprintf(stderr, "quota_probe: no RDMA device\n");
    return 1;
  }
  struct ibv_context* ctx = ibv_open_device(devs[0]);
  struct ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : NULL;
  struct ibv_cq* cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
  if (cq == NULL) {
    fprintf(stderr, "quota_probe: setup failed: %s\n", strerror(errno));
    return 1;
  }
  if (strcmp(argv[1], "qp") == 0) {
    struct ibv_qp* qps[64] = {0};
    struct ibv_qp_init_attr init = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    int made = 0, err = 0;
    while (made < n + 8 && made < 64) {
      errno = 0;
      qps[made] = ibv_create_qp(pd, &init);
      if (qps[made] == NULL) {
        err = errno;
        break;
      }
      made++;
    }
    printf("qps %d errno %s\n", made, errno_name(err));
    if (made > 0) {
      if (ibv_destroy_qp(qps[made - 1]) != 0) return 1;
      errno = 0;
      qps[made - 1] = ibv_create_qp(pd, &init);
      printf(qps[made - 1] ? "recreate ok\n" : "recreate errno %s\n", errno_name(errno));
    }
    for (int i = 0; i < made; ++i)
      if (qps[i] != NULL) ibv_destroy_qp(qps[i]);
  } else if (strcmp(argv[1], "mr") == 0) {
    struct ibv_mr* mrs[64] = {0};
    char* mem = calloc(64, (size_t)n);
    int made = 0, err = 0;
    while (mem != NULL && made < 64) {
      errno = 0;
      mrs[made] = ibv_reg_mr(pd, mem + (size_t)made * n, (size_t)n, IBV_ACCESS_LOCAL_WRITE);
      if (mrs[made] == NULL) {
        err = errno;
        break;
      }
      made++;
    }
    printf("mrs %d errno %s\n", made, errno_name(err));
    for (int i = 0; i < made; ++i) ibv_dereg_mr(mrs[i]);
    free(mem);
  } else {
    fprintf(stderr, "quota_probe: unknown mode %s\n", argv[1]);
    return 2;
  }
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(devs);
  return 0;
}
