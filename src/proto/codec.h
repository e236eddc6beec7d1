// Explicit little-endian encoding of control messages (docs/wire-protocol.md, "Control channel").
//
// A message type lists its fields once, in order, in a `visit` member template; the same list
// drives Writer (encode) and Reader (decode), so the two cannot drift apart. Fields are
// unsigned integers, fixed-size arrays of them, or nested message structs. There is no
// padding and no struct casting: every byte is written and read explicitly.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace wharf::proto {

template <class T>
concept Visitable = requires(T& t) {
  t.visit([](auto&) {});
};

class Writer {
 public:
  Writer(uint8_t* buf, size_t cap) : buf_(buf), cap_(cap) {}

  template <class T>
  void operator()(const T& v) {
    if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
      put_uint(static_cast<uint64_t>(v), sizeof(T));
    } else if constexpr (std::is_array_v<T>) {
      for (const auto& e : v) (*this)(e);
    } else if constexpr (requires { std::tuple_size<T>::value; }) {
      for (const auto& e : v) (*this)(e);
    } else {
      // Visiting does not modify; the member template is shared with Reader.
      const_cast<T&>(v).visit(*this);
    }
  }

  bool ok() const { return ok_; }
  size_t size() const { return len_; }

 private:
  void put_uint(uint64_t v, size_t n) {
    if (!ok_ || cap_ - len_ < n) {
      ok_ = false;
      return;
    }
    for (size_t i = 0; i < n; ++i) buf_[len_++] = static_cast<uint8_t>(v >> (8 * i));
  }

  uint8_t* buf_;
  size_t cap_;
  size_t len_ = 0;
  bool ok_ = true;
};

class Reader {
 public:
  Reader(const uint8_t* buf, size_t len) : buf_(buf), len_(len) {}

  template <class T>
  void operator()(T& v) {
    if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
      v = static_cast<T>(get_uint(sizeof(T)));
    } else if constexpr (std::is_array_v<T>) {
      for (auto& e : v) (*this)(e);
    } else if constexpr (requires { std::tuple_size<T>::value; }) {
      for (auto& e : v) (*this)(e);
    } else {
      v.visit(*this);
    }
  }

  bool ok() const { return ok_; }
  // True when every byte was consumed without running short.
  bool done() const { return ok_ && pos_ == len_; }
  size_t pos() const { return pos_; }

 private:
  uint64_t get_uint(size_t n) {
    if (!ok_ || len_ - pos_ < n) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(buf_[pos_++]) << (8 * i);
    return v;
  }

  const uint8_t* buf_;
  size_t len_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Encodes `msg` into buf; returns bytes written or 0 if it does not fit.
template <class T>
size_t encode(const T& msg, uint8_t* buf, size_t cap) {
  Writer w(buf, cap);
  w(msg);
  return w.ok() ? w.size() : 0;
}

// Decodes exactly `len` bytes into *msg; false on truncation or trailing bytes.
template <class T>
bool decode(const uint8_t* buf, size_t len, T* msg) {
  Reader r(buf, len);
  r(*msg);
  return r.done();
}

}  // namespace wharf::proto
