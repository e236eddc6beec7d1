// The headers nearly every test translation unit parses, precompiled once per build tree
// (tests/CMakeLists.txt, GCC only) and forced into each test with -include. Only system and
// third-party headers: a project header here would rebuild every test when it changes.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>
