#include "dpkit/mechanisms/random.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dpkit::mechanisms {
namespace {

EVP_CIPHER_CTX* Context(void* p) { return static_cast<EVP_CIPHER_CTX*>(p); }

void IncrementForkGeneration() {
  internal_random::fork_generation.fetch_add(1, std::memory_order_relaxed);
}

void RegisterForkHandlerOnce() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, &IncrementForkGeneration); });
}

// Largest number of keystream bytes produced under one key in Fill(); keeps the
// 32-bit ChaCha20 block counter far from wrapping (2^32 blocks = 256 GiB).
constexpr size_t kMaxBytesPerKey = size_t{1} << 20;

}  // namespace

void RandomGenerator::Fill(uint64_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = NextUint64();
}

uint64_t UniformUint64Below(RandomGenerator& rng, uint64_t bound) {
  // Lemire 2019, Algorithm 5: multiply-shift with rejection of the biased low part.
  uint64_t x = rng.NextUint64();
  unsigned __int128 m = static_cast<unsigned __int128>(x) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      x = rng.NextUint64();
      m = static_cast<unsigned __int128>(x) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

absl::Status ReadOsEntropy(unsigned char* out, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t got = getrandom(out + done, bytes - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("cannot read OS entropy with getrandom(2): ", std::strerror(errno)));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SecureRandomGenerator>> SecureRandomGenerator::Create() {
  return CreateWithEntropySourceForTesting(&ReadOsEntropy);
}

absl::StatusOr<std::unique_ptr<SecureRandomGenerator>>
SecureRandomGenerator::CreateWithEntropySourceForTesting(EntropySource source) {
  std::unique_ptr<SecureRandomGenerator> generator(new SecureRandomGenerator());
  absl::Status status = generator->Init(source);
  if (!status.ok()) return status;
  return generator;
}

std::unique_ptr<SecureRandomGenerator> SecureRandomGenerator::CreateWithKeyForTesting(
    const std::array<unsigned char, 32>& key) {
  std::unique_ptr<SecureRandomGenerator> generator(new SecureRandomGenerator());
  if (!generator->Init(&ReadOsEntropy).ok()) std::abort();  // test-only; key overwritten
  generator->key_ = key;
  return generator;
}

absl::Status SecureRandomGenerator::Init(EntropySource source) {
  RegisterForkHandlerOnce();
  fork_generation_ = CurrentForkGeneration();
  cipher_context_ = EVP_CIPHER_CTX_new();
  if (cipher_context_ == nullptr || EVP_chacha20() == nullptr) {
    return absl::InternalError("OpenSSL cannot provide the ChaCha20 cipher");
  }
  absl::Status status = source(key_.data(), key_.size());
  if (!status.ok()) return status;
  position_ = kBlockWords;  // first draw fills a block
  return absl::OkStatus();
}

SecureRandomGenerator::~SecureRandomGenerator() {
  EVP_CIPHER_CTX_free(Context(cipher_context_));
  OPENSSL_cleanse(key_.data(), key_.size());
  OPENSSL_cleanse(block_, sizeof(block_));
}

void SecureRandomGenerator::Keystream(unsigned char* out, size_t bytes) {
  // Each key is used for exactly one call, so a zero counter and nonce are safe
  // (RFC 8439 §2.3: the 16-byte OpenSSL IV is the 32-bit counter then the nonce).
  static const unsigned char kZeroIv[16] = {0};
  EVP_CIPHER_CTX* ctx = Context(cipher_context_);
  int written = 0;
  // With a valid context and key these calls cannot fail (a stream cipher with no
  // padding); the result is checked regardless and failure aborts the process
  // rather than emitting predictable noise.
  bool ok = EVP_EncryptInit_ex(ctx, EVP_chacha20(), nullptr, key_.data(), kZeroIv) == 1;
  std::memset(out, 0, bytes);
  size_t done = 0;
  while (ok && done < bytes) {
    const int chunk = static_cast<int>(std::min<size_t>(bytes - done, 1 << 30));
    ok = EVP_EncryptUpdate(ctx, out + done, &written, out + done, chunk) == 1 &&
         written == chunk;
    done += static_cast<size_t>(chunk);
  }
  // Fast key erasure: the next key is keystream that is never output.
  std::array<unsigned char, 32> next_key{};
  ok = ok && EVP_EncryptUpdate(ctx, next_key.data(), &written, next_key.data(), 32) == 1 &&
       written == 32;
  if (!ok) std::abort();
  key_ = next_key;
  OPENSSL_cleanse(next_key.data(), next_key.size());
}

void SecureRandomGenerator::Refill() {
  const uint64_t generation = CurrentForkGeneration();
  if (generation != fork_generation_) {
    // We are in a child process that inherited this state. Derive a new key that
    // the parent never derives: ChaCha20 under the inherited key with a nonce
    // holding the pid and fork generation (the parent only ever uses nonce 0),
    // XORed with fresh OS entropy when available. Discard the inherited block.
    unsigned char iv[16] = {0};
    const uint64_t pid = static_cast<uint64_t>(getpid());
    std::memcpy(iv + 4, &pid, 8);
    const uint32_t low_generation = static_cast<uint32_t>(generation);
    std::memcpy(iv + 12, &low_generation, 4);
    std::array<unsigned char, 32> derived{};
    int written = 0;
    EVP_CIPHER_CTX* ctx = Context(cipher_context_);
    const bool ok =
        EVP_EncryptInit_ex(ctx, EVP_chacha20(), nullptr, key_.data(), iv) == 1 &&
        EVP_EncryptUpdate(ctx, derived.data(), &written, derived.data(), 32) == 1;
    if (!ok) std::abort();
    std::array<unsigned char, 32> fresh{};
    if (ReadOsEntropy(fresh.data(), fresh.size()).ok()) {
      for (size_t i = 0; i < 32; ++i) derived[i] ^= fresh[i];
    }
    key_ = derived;
    OPENSSL_cleanse(derived.data(), derived.size());
    OPENSSL_cleanse(fresh.data(), fresh.size());
    fork_generation_ = generation;
  }
  Keystream(reinterpret_cast<unsigned char*>(block_), sizeof(block_));
  position_ = 0;
}

void SecureRandomGenerator::Fill(uint64_t* out, size_t n) {
  if (fork_generation_ != CurrentForkGeneration()) Refill();
  // Use what is left of the current block first.
  const size_t from_block = std::min(n, kBlockWords - position_);
  std::memcpy(out, block_ + position_, from_block * sizeof(uint64_t));
  position_ += from_block;
  out += from_block;
  n -= from_block;
  // Large requests: keystream straight into the output, one key per MiB.
  while (n >= kBlockWords) {
    const size_t words = std::min(n, kMaxBytesPerKey / sizeof(uint64_t));
    Keystream(reinterpret_cast<unsigned char*>(out), words * sizeof(uint64_t));
    out += words;
    n -= words;
  }
  if (n > 0) {
    Refill();
    std::memcpy(out, block_, n * sizeof(uint64_t));
    position_ = n;
  }
}

absl::StatusOr<SecureRandomGenerator*> ThreadLocalSecureRandomGenerator() {
  thread_local absl::StatusOr<std::unique_ptr<SecureRandomGenerator>> generator =
      SecureRandomGenerator::Create();
  if (!generator.ok()) return generator.status();
  return generator->get();
}

}  // namespace dpkit::mechanisms
