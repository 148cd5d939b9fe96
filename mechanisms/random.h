// Randomness for privacy noise.
//
// Every mechanism in dpkit takes a RandomGenerator& so that tests can inject a
// seeded generator; privacy noise in production comes only from
// SecureRandomGenerator, a ChaCha20 keystream (OpenSSL's EVP implementation)
// keyed from the operating system's entropy (getrandom(2)).
//
// Thread-compatibility: a generator is used by one thread at a time. There is no
// process-wide generator and no lock per draw; use one generator per thread (for
// example ThreadLocalSecureRandomGenerator()).
#ifndef DPKIT_MECHANISMS_RANDOM_H_
#define DPKIT_MECHANISMS_RANDOM_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpkit::mechanisms {
namespace internal_random {
// Incremented in the child by a pthread_atfork handler (see random.cc).
inline std::atomic<uint64_t> fork_generation{0};
}  // namespace internal_random

// A source of independent uniformly distributed 64-bit words.
class RandomGenerator {
 public:
  virtual ~RandomGenerator() = default;

  // One uniformly distributed 64-bit word.
  virtual uint64_t NextUint64() = 0;

  // Writes n uniformly distributed words to out. Generators override this with a
  // bulk path; the default calls NextUint64() n times.
  virtual void Fill(uint64_t* out, size_t n);

  // A uniform double in [0, 1) with 53 random bits: k * 2^-53, k uniform in
  // [0, 2^53).
  double UniformDouble() {
    return static_cast<double>(NextUint64() >> 11) * 0x1.0p-53;
  }
};

// Converts a random word to a double in [0, 1) (53 random bits).
inline double WordToUniformDouble(uint64_t word) {
  return static_cast<double>(word >> 11) * 0x1.0p-53;
}
// Converts a random word to a double in (0, 1] (53 random bits): safe for log().
inline double WordToUniformDoubleOpenAtZero(uint64_t word) {
  return static_cast<double>((word >> 11) + 1) * 0x1.0p-53;
}

// Hands out a generator's words from a local buffer of kSize, refilled with one Fill()
// call, so that hot per-sample loops make no virtual call per word. Words come out in
// the generator's order. Holds a reference: the generator must outlive it.
template <size_t kSize>
class BufferedWords {
 public:
  explicit BufferedWords(RandomGenerator& rng) : rng_(rng) {}
  uint64_t Next() {
    if (position_ == kSize) {
      rng_.Fill(words_, kSize);
      position_ = 0;
    }
    return words_[position_++];
  }

 private:
  RandomGenerator& rng_;
  uint64_t words_[kSize];
  size_t position_ = kSize;
};

// A uniform integer in [0, bound) without modulo bias (Lemire 2019, "Fast random
// integer generation in an interval", Algorithm 5). Requires bound > 0.
uint64_t UniformUint64Below(RandomGenerator& rng, uint64_t bound);

// Cryptographically secure generator: ChaCha20 (RFC 8439, OpenSSL EVP) keyed with
// 256 bits from getrandom(2), producing 16 KiB blocks. After each block the key is
// replaced by keystream output that is never revealed ("fast key erasure",
// Bernstein 2017), so a later compromise of the state does not reveal earlier
// noise. A child process created by fork() rekeys before its first draw (with new
// OS entropy mixed into the inherited key), so parent and child never share noise.
class SecureRandomGenerator final : public RandomGenerator {
 public:
  // Seeds from the OS. Returns an error (never crashes, never falls back to a weak
  // source) if the OS cannot supply entropy or OpenSSL cannot run ChaCha20.
  static absl::StatusOr<std::unique_ptr<SecureRandomGenerator>> Create();

  // Create() with an injected entropy source, so that tests can check that an
  // entropy failure reaches the caller as an error. Never for noise.
  using EntropySource = absl::Status (*)(unsigned char* out, size_t bytes);
  static absl::StatusOr<std::unique_ptr<SecureRandomGenerator>>
  CreateWithEntropySourceForTesting(EntropySource source);

  // The same construction with a caller-chosen key, so that tests can check the
  // output against an independent ChaCha20 implementation. Never for noise.
  static std::unique_ptr<SecureRandomGenerator> CreateWithKeyForTesting(
      const std::array<unsigned char, 32>& key);

  ~SecureRandomGenerator() override;
  SecureRandomGenerator(const SecureRandomGenerator&) = delete;
  SecureRandomGenerator& operator=(const SecureRandomGenerator&) = delete;

  uint64_t NextUint64() override {
    if (position_ == kBlockWords || fork_generation_ != CurrentForkGeneration()) {
      Refill();
    }
    return block_[position_++];
  }
  void Fill(uint64_t* out, size_t n) override;

  // Size of one keystream block in 64-bit words (16 KiB).
  static constexpr size_t kBlockWords = 2048;

  // Number of fork() calls in this process's ancestry since it started; a change
  // means the generator's state was inherited by a child process.
  static uint64_t CurrentForkGeneration() {
    return internal_random::fork_generation.load(std::memory_order_relaxed);
  }

 private:
  SecureRandomGenerator() = default;
  absl::Status Init(EntropySource source);
  // Produces the next block and the next key. After fork(), rekeys first.
  void Refill();
  // Writes `bytes` keystream bytes for the current key to `out`, then advances
  // the key using 32 further keystream bytes.
  void Keystream(unsigned char* out, size_t bytes);

  void* cipher_context_ = nullptr;  // EVP_CIPHER_CTX*
  std::array<unsigned char, 32> key_{};
  uint64_t fork_generation_ = 0;
  size_t position_ = kBlockWords;
  alignas(64) uint64_t block_[kBlockWords];
};

// The calling thread's secure generator, created on first use (one per thread, so
// no locking). Returns the entropy error if creation failed.
absl::StatusOr<SecureRandomGenerator*> ThreadLocalSecureRandomGenerator();

// Reads `bytes` bytes of OS entropy with getrandom(2), retrying on EINTR and
// partial reads. Exposed for tests.
absl::Status ReadOsEntropy(unsigned char* out, size_t bytes);

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_RANDOM_H_
