// Runs the c10d-store-server program and talks to it as a rank would.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "store/TCPStore.hpp"

namespace {

TEST(StoreServerToolTest, ServesClientsAndStopsOnSigterm) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execl(C10D_STORE_SERVER_PATH, C10D_STORE_SERVER_PATH, "--address", "127.0.0.1", "--port", "0",
          "--timeout", "60", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  FILE* lines = fdopen(out[0], "r");
  char line[256] = {0};
  ASSERT_NE(fgets(line, sizeof(line), lines), nullptr) << "server printed nothing";
  unsigned port = 0;
  ASSERT_EQ(sscanf(line, "c10d-store-server listening on 127.0.0.1 port %u", &port), 1) << line;

  {
    c10d::TCPStore a("127.0.0.1", static_cast<uint16_t>(port));
    c10d::TCPStore b("127.0.0.1", static_cast<uint16_t>(port));
    a.setString("job", "started");
    EXPECT_EQ(b.getString("job"), "started");
    EXPECT_EQ(a.add("ranks", 1) + b.add("ranks", 1), 3);
  }

  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  fclose(lines);
}

TEST(StoreServerToolTest, BadArgumentsFail) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDERR_FILENO);
    dup2(devnull, STDOUT_FILENO);
    execl(C10D_STORE_SERVER_PATH, C10D_STORE_SERVER_PATH, "--port", "70000",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_NE(WEXITSTATUS(status), 127);
}

}  // namespace
