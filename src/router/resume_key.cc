#include "router/resume_key.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "common/private_file.h"
#include "common/unique_fd.h"

namespace wharf::router {

namespace {

bool read_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r, n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

int ResumeKey::load_or_create(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid() && errno == ENOENT) {
    if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1) return EIO;
    // Written whole under a temporary name and renamed, so a crash never leaves half a key.
    const std::string tmp = path + ".new";
    ::unlink(tmp.c_str());
    UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!out.valid()) return errno;
    if (::write(out.get(), key_.data(), key_.size()) != static_cast<ssize_t>(key_.size()) ||
        ::fsync(out.get()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno != 0 ? errno : EIO;
      ::unlink(tmp.c_str());
      return err;
    }
    loaded_ = true;
    return 0;
  }
  if (!fd.valid()) return errno;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return errno;
  // Readable by others, it would let any container forge proofs.
  if (!is_private_file(st) || st.st_size != static_cast<off_t>(key_.size())) return EINVAL;
  if (!read_all(fd.get(), key_.data(), key_.size())) return EIO;
  loaded_ = true;
  return 0;
}

uint64_t ResumeKey::proof(ProofKind kind, uint32_t number, uint64_t netns_ino) const {
  if (!loaded_) return 0;
  uint8_t msg[13];
  msg[0] = static_cast<uint8_t>(kind);
  std::memcpy(msg + 1, &number, sizeof(number));
  std::memcpy(msg + 5, &netns_ino, sizeof(netns_ino));
  uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), msg, sizeof(msg), mac, &len) ==
          nullptr ||
      len < sizeof(uint64_t))
    return 0;
  uint64_t p = 0;
  std::memcpy(&p, mac, sizeof(p));
  return p == 0 ? 1 : p;  // 0 means "no proof"
}

}  // namespace wharf::router
