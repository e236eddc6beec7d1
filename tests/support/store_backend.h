// A test fixture parameterised by KvStore backend ("sqlite" or "etcd"): each test gets a
// fresh, empty store (a SQLite file in a temporary directory, or a real etcd on loopback
// started for the test) and can restart it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "control/kv_store.h"
#include "support/etcd_process.h"

namespace wharf::test_support {

class StoreBackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "etcd") {
      if (!EtcdProcess::available()) GTEST_SKIP() << "etcd is not installed";
      etcd_ = std::make_unique<EtcdProcess>();
      ASSERT_TRUE(etcd_->ok()) << "etcd did not start";
    } else {
      char dir[] = "/tmp/wharf-kv-XXXXXX";
      ASSERT_NE(mkdtemp(dir), nullptr);
      dir_ = dir;
    }
    open();
  }
  void TearDown() override {
    store_.reset();
    etcd_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string url() const {
    return GetParam() == "etcd" ? "etcd:" + etcd_->base_url() : "sqlite:" + dir_ + "/state.db";
  }
  void open() {
    Status st = control::open_kv_store(url(), &store_);
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
  // Closes the store and the process behind it, and opens it again.
  void reopen() {
    store_.reset();
    if (etcd_ != nullptr) etcd_->restart();
    open();
  }

  std::unique_ptr<control::KvStore> store_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::string dir_;
};

// Names the instantiations after their backend.
inline std::string backend_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace wharf::test_support
