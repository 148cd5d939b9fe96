#include "dpkit/base/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace dpkit::base {
namespace {

TEST(FreeLoopbackPortTest, ThePortCanBeBoundOnLoopback) {
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  ASSERT_LT(port, 65536);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  close(fd);
}

}  // namespace
}  // namespace dpkit::base
