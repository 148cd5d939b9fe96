#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"

#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <bitset>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/statistics_testing.h"

namespace dpkit::mechanisms {
namespace {

// Independent ChaCha20 block function written from RFC 8439 §2.3 (not OpenSSL).
uint32_t Rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }
void QuarterRound(uint32_t* s, int a, int b, int c, int d) {
  s[a] += s[b]; s[d] ^= s[a]; s[d] = Rotl32(s[d], 16);
  s[c] += s[d]; s[b] ^= s[c]; s[b] = Rotl32(s[b], 12);
  s[a] += s[b]; s[d] ^= s[a]; s[d] = Rotl32(s[d], 8);
  s[c] += s[d]; s[b] ^= s[c]; s[b] = Rotl32(s[b], 7);
}
uint32_t Load32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
// Keystream of `bytes` bytes for key, nonce (12 bytes) and initial counter.
std::vector<unsigned char> ReferenceChaCha20(const unsigned char* key,
                                             const unsigned char* nonce, uint32_t counter,
                                             size_t bytes) {
  std::vector<unsigned char> out;
  while (out.size() < bytes) {
    uint32_t state[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
    for (int i = 0; i < 8; ++i) state[4 + i] = Load32(key + 4 * i);
    state[12] = counter++;
    for (int i = 0; i < 3; ++i) state[13 + i] = Load32(nonce + 4 * i);
    uint32_t w[16];
    std::memcpy(w, state, sizeof(w));
    for (int round = 0; round < 10; ++round) {
      QuarterRound(w, 0, 4, 8, 12); QuarterRound(w, 1, 5, 9, 13);
      QuarterRound(w, 2, 6, 10, 14); QuarterRound(w, 3, 7, 11, 15);
      QuarterRound(w, 0, 5, 10, 15); QuarterRound(w, 1, 6, 11, 12);
      QuarterRound(w, 2, 7, 8, 13); QuarterRound(w, 3, 4, 9, 14);
    }
    for (int i = 0; i < 16 && out.size() < bytes; ++i) {
      const uint32_t v = w[i] + state[i];
      for (int b = 0; b < 4 && out.size() < bytes; ++b) out.push_back((v >> (8 * b)) & 0xFF);
    }
  }
  return out;
}

std::vector<unsigned char> OpenSslChaCha20(const unsigned char* key, const unsigned char* nonce,
                                           uint32_t counter, size_t bytes) {
  unsigned char iv[16];
  for (int b = 0; b < 4; ++b) iv[b] = (counter >> (8 * b)) & 0xFF;
  std::memcpy(iv + 4, nonce, 12);
  std::vector<unsigned char> out(bytes, 0);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int written = 0;
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, EVP_chacha20(), nullptr, key, iv), 1);
  EXPECT_EQ(EVP_EncryptUpdate(ctx, out.data(), &written, out.data(), static_cast<int>(bytes)), 1);
  EVP_CIPHER_CTX_free(ctx);
  return out;
}

TEST(ChaCha20Test, ReferenceMatchesRfc8439TestVectors) {
  // RFC 8439 Appendix A.1, test vectors #1 and #2 (all-zero key and nonce,
  // counters 0 and 1).
  const unsigned char zero[32] = {0};
  const std::vector<unsigned char> vector1 = {
      0x76, 0xb8, 0xe0, 0xad, 0xa0, 0xf1, 0x3d, 0x90, 0x40, 0x5d, 0x6a, 0xe5, 0x53,
      0x86, 0xbd, 0x28, 0xbd, 0xd2, 0x19, 0xb8, 0xa0, 0x8d, 0xed, 0x1a, 0xa8, 0x36,
      0xef, 0xcc, 0x8b, 0x77, 0x0d, 0xc7, 0xda, 0x41, 0x59, 0x7c, 0x51, 0x57, 0x48,
      0x8d, 0x77, 0x24, 0xe0, 0x3f, 0xb8, 0xd8, 0x4a, 0x37, 0x6a, 0x43, 0xb8, 0xf4,
      0x15, 0x18, 0xa1, 0x1c, 0xc3, 0x87, 0xb6, 0x69, 0xb2, 0xee, 0x65, 0x86};
  EXPECT_EQ(ReferenceChaCha20(zero, zero, 0, 64), vector1);
  EXPECT_EQ(OpenSslChaCha20(zero, zero, 0, 64), vector1);
  // RFC 8439 §2.3.2: key 00..1f, nonce 00 00 00 09 00 00 00 4a 00 00 00 00,
  // counter 1; first words of the serialized block.
  unsigned char key[32];
  for (int i = 0; i < 32; ++i) key[i] = static_cast<unsigned char>(i);
  const unsigned char nonce[12] = {0, 0, 0, 0x09, 0, 0, 0, 0x4a, 0, 0, 0, 0};
  const std::vector<unsigned char> block_prefix = {0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b,
                                                   0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f};
  std::vector<unsigned char> ours = ReferenceChaCha20(key, nonce, 1, 12);
  EXPECT_EQ(ours, block_prefix);
  EXPECT_EQ(OpenSslChaCha20(key, nonce, 1, 12), block_prefix);
}

TEST(SecureRandomGeneratorTest, OutputIsChaCha20KeystreamWithFastKeyErasure) {
  std::array<unsigned char, 32> key;
  for (int i = 0; i < 32; ++i) key[i] = static_cast<unsigned char>(7 * i + 3);
  auto rng = SecureRandomGenerator::CreateWithKeyForTesting(key);
  const size_t block_bytes = SecureRandomGenerator::kBlockWords * 8;
  const unsigned char nonce[12] = {0};
  // Block 1 = keystream[0, 16 KiB); next key = keystream[16 KiB, 16 KiB + 32).
  std::vector<unsigned char> stream = ReferenceChaCha20(key.data(), nonce, 0, block_bytes + 32);
  std::vector<unsigned char> block2 =
      ReferenceChaCha20(stream.data() + block_bytes, nonce, 0, block_bytes);
  std::vector<uint64_t> words(2 * SecureRandomGenerator::kBlockWords);
  for (uint64_t& w : words) w = rng->NextUint64();
  EXPECT_EQ(std::memcmp(words.data(), stream.data(), block_bytes), 0);
  EXPECT_EQ(std::memcmp(words.data() + SecureRandomGenerator::kBlockWords, block2.data(),
                        block_bytes),
            0);
}

TEST(SecureRandomGeneratorTest, BulkFillEqualsKeystreamAcrossBlockBoundaries) {
  std::array<unsigned char, 32> key{};
  key[0] = 1;
  auto a = SecureRandomGenerator::CreateWithKeyForTesting(key);
  // 5 words from the first block, then a bulk fill of the rest of the block.
  std::vector<uint64_t> words(SecureRandomGenerator::kBlockWords);
  for (int i = 0; i < 5; ++i) words[i] = a->NextUint64();
  a->Fill(words.data() + 5, words.size() - 5);
  const unsigned char nonce[12] = {0};
  std::vector<unsigned char> stream =
      ReferenceChaCha20(key.data(), nonce, 0, SecureRandomGenerator::kBlockWords * 8);
  EXPECT_EQ(std::memcmp(words.data(), stream.data(), stream.size()), 0);
}

TEST(SecureRandomGeneratorTest, TwoGeneratorsProduceDifferentStreams) {
  auto a = SecureRandomGenerator::Create();
  auto b = SecureRandomGenerator::Create();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  int equal = 0;
  for (int i = 0; i < 64; ++i) equal += (*a)->NextUint64() == (*b)->NextUint64();
  // Equal 64-bit words from independent keys: probability 64 * 2^-64.
  EXPECT_EQ(equal, 0);
}

TEST(SecureRandomGeneratorTest, ByteFrequenciesAreUniform) {
  // 2^20 bytes (a bulk fill spanning many blocks and keys) into 256 cells,
  // expected 4096 each; chi-square with 255 degrees of freedom at alpha = 1e-6.
  auto rng = SecureRandomGenerator::Create();
  ASSERT_TRUE(rng.ok());
  std::vector<uint64_t> words(1 << 17);
  (*rng)->Fill(words.data(), 3);
  (*rng)->Fill(words.data() + 3, words.size() - 3);
  std::vector<double> counts(256, 0.0), expected(256, words.size() * 8.0 / 256);
  for (uint64_t w : words) {
    for (int b = 0; b < 8; ++b) counts[(w >> (8 * b)) & 0xFF] += 1;
  }
  int dof = 0;
  const double chi2 = ChiSquareStatistic(counts, expected, 5.0, &dof);
  EXPECT_EQ(dof, 255);
  EXPECT_LT(chi2, ChiSquareCriticalValue(dof, 1e-6));
}

TEST(SecureRandomGeneratorTest, ForkedChildDrawsDifferentNoiseThanParent) {
  auto rng = SecureRandomGenerator::Create();
  ASSERT_TRUE(rng.ok());
  (*rng)->NextUint64();  // the child inherits a partly used block
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint64_t words[4];
    for (uint64_t& w : words) w = (*rng)->NextUint64();
    const ssize_t written = write(fds[1], words, sizeof(words));
    _exit(written == sizeof(words) ? 0 : 1);
  }
  uint64_t parent[4], child[4];
  for (uint64_t& w : parent) w = (*rng)->NextUint64();
  ASSERT_EQ(read(fds[0], child, sizeof(child)), static_cast<ssize_t>(sizeof(child)));
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(status, 0);
  close(fds[0]);
  close(fds[1]);
  for (int i = 0; i < 4; ++i) EXPECT_NE(parent[i], child[i]);
}

TEST(SecureRandomGeneratorTest, EntropyFailureIsReturnedAsAnError) {
  auto failing = [](unsigned char*, size_t) -> absl::Status {
    return absl::UnavailableError("no entropy");
  };
  auto rng = SecureRandomGenerator::CreateWithEntropySourceForTesting(failing);
  ASSERT_FALSE(rng.ok());
  EXPECT_EQ(rng.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(rng.status().message(), "no entropy");
}

TEST(SecureRandomGeneratorTest, ThreadsGetTheirOwnGenerators) {
  // One generator per thread, no shared state: two threads draw different words.
  uint64_t words[2][8];
  auto draw = [&](int t) {
    auto rng = ThreadLocalSecureRandomGenerator();
    ASSERT_TRUE(rng.ok());
    for (uint64_t& w : words[t]) w = (*rng)->NextUint64();
  };
  std::thread a(draw, 0), b(draw, 1);
  a.join();
  b.join();
  int equal = 0;
  for (int i = 0; i < 8; ++i) equal += words[0][i] == words[1][i];
  EXPECT_EQ(equal, 0);  // probability 8 * 2^-64 for independent keys
}

TEST(SecureRandomGeneratorTest, ThreadLocalGeneratorIsCreated) {
  auto rng = ThreadLocalSecureRandomGenerator();
  ASSERT_TRUE(rng.ok()) << rng.status();
  auto again = ThreadLocalSecureRandomGenerator();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*rng, *again);
}

TEST(SeededRandomGeneratorForTestingTest, IsReproducibleAndFillMatchesNext) {
  SeededRandomGeneratorForTesting a(42), b(42), c(43);
  std::vector<uint64_t> bulk(10);
  b.Fill(bulk.data(), bulk.size());
  int differ = 0;
  for (uint64_t w : bulk) {
    EXPECT_EQ(a.NextUint64(), w);
    differ += c.NextUint64() != w;
  }
  EXPECT_EQ(differ, 10);
}

TEST(UniformUint64BelowTest, IsUniformOverSevenValues) {
  // 7e5 draws, expected 1e5 per value; chi-square (6 dof) at alpha = 1e-6.
  SeededRandomGeneratorForTesting rng(1);
  std::vector<double> counts(7, 0.0), expected(7, 1e5);
  for (int i = 0; i < 700000; ++i) counts[UniformUint64Below(rng, 7)] += 1;
  int dof = 0;
  EXPECT_LT(ChiSquareStatistic(counts, expected, 5.0, &dof), ChiSquareCriticalValue(6, 1e-6));
  EXPECT_EQ(UniformUint64Below(rng, 1), 0u);
}

TEST(UniformDoubleTest, IsInUnitIntervalWithMeanOneHalf) {
  // Mean of 1e6 uniforms: sd = sqrt(1/12/1e6) = 2.9e-4; 5.4 sd bounds the
  // two-sided false-failure probability by 1e-7.
  SeededRandomGeneratorForTesting rng(2);
  double sum = 0.0;
  for (int i = 0; i < 1000000; ++i) {
    const double u = rng.UniformDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 1e6, 0.5, 5.4 * std::sqrt(1.0 / 12 / 1e6));
}

}  // namespace
}  // namespace dpkit::mechanisms
