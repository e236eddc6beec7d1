// TCP ping-pong of fixed-size messages between two hosts, both ends busy-polling nonblocking
// sockets as Wharf's routers do while they have work: the baseline for ib_write_lat between
// hosts (bench/hosts.sh).
//
//   wharf-tcp-pingpong server ADDR PORT SIZE
//   wharf-tcp-pingpong client ADDR PORT SIZE ITERS
//
// The server echoes ITERS messages and exits; the client prints the median one-way latency
// (round trip / 2, as perftest's "t_typical"): "size=S iters=N typical_us=X".
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "wharf-tcp-pingpong: %s: %s\n", what, strerror(errno));
  exit(1);
}

sockaddr_in address(const char* addr, const char* port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(atoi(port)));
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) die("bad address");
  return a;
}

// Moves exactly len bytes, spinning on the nonblocking socket.
void spin_io(int fd, uint8_t* p, size_t len, bool write) {
  size_t done = 0;
  while (done < len) {
    ssize_t n =
        write ? send(fd, p + done, len - done, MSG_NOSIGNAL) : recv(fd, p + done, len - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      die(write ? "send" : "recv");
    }
  }
}

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s server ADDR PORT SIZE | client ADDR PORT SIZE ITERS\n", argv[0]);
    return 2;
  }
  const std::string role = argv[1];
  const sockaddr_in a = address(argv[2], argv[3]);
  const size_t size = static_cast<size_t>(atol(argv[4]));
  std::vector<uint8_t> buf(std::max<size_t>(size, 1));
  int fd;
  if (role == "server") {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ls < 0 || bind(ls, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(ls, 1) != 0)
      die("listen");
    fd = accept4(ls, nullptr, nullptr, SOCK_NONBLOCK);
    if (fd < 0) die("accept");
    close(ls);
    tune(fd);
    for (;;) {  // echo until the client closes
      size_t done = 0;
      while (done < size) {
        ssize_t n = recv(fd, buf.data() + done, size - done, 0);
        if (n == 0) return 0;
        if (n > 0)
          done += static_cast<size_t>(n);
        else if (errno != EAGAIN && errno != EINTR)
          die("recv");
      }
      spin_io(fd, buf.data(), size, true);
    }
  }
  if (role != "client" || argc < 6) return 2;
  const int iters = atoi(argv[5]);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) die("connect");
  tune(fd);
  if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) die("fcntl");
  std::vector<double> rtt_us;
  rtt_us.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    spin_io(fd, buf.data(), size, true);
    spin_io(fd, buf.data(), size, false);
    rtt_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  close(fd);
  std::nth_element(rtt_us.begin(), rtt_us.begin() + iters / 2, rtt_us.end());
  printf("size=%zu iters=%d typical_us=%.2f\n", size, iters,
         rtt_us[static_cast<size_t>(iters / 2)] / 2);
  return 0;
}
