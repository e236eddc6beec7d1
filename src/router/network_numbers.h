// This router's numbers for the virtual networks (tenant, network) it has met: never 0, made
// on first use. The other hosts' routers learn them (RemotePath announces each new one) and
// put them in their packets to this host (router/remote.h, "Isolation between hosts").
// Router thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

namespace wharf::router {

class NetworkNumbers {
 public:
  using NewNumber =
      std::function<void(const std::string& tenant, const std::string& network, uint32_t number)>;

  // The number of tenant/network; a new one is first told to on_new (if set).
  uint32_t number(const std::string& tenant, const std::string& network) {
    const auto next = static_cast<uint32_t>(numbers_.size() + 1);
    auto [it, added] = numbers_.emplace(std::make_pair(tenant, network), next);
    if (added && on_new_) on_new_(tenant, network, it->second);
    return it->second;
  }
  // Calls f(tenant, network, number) for every network numbered so far.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [key, n] : numbers_) f(key.first, key.second, n);
  }
  void on_new(NewNumber f) { on_new_ = std::move(f); }
  // Whether `number` names a network numbered here (numbers run from 1, in order).
  bool known(uint32_t number) const { return number >= 1 && number <= numbers_.size(); }

 private:
  std::map<std::pair<std::string, std::string>, uint32_t> numbers_;
  NewNumber on_new_;
};

}  // namespace wharf::router
