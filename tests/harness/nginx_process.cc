#include "harness/nginx_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/redis_process.h"

namespace hotrow::testing {

std::unique_ptr<NginxProcess> NginxProcess::Start(const std::vector<uint16_t>& upstream_ports) {
  std::unique_ptr<NginxProcess> n(new NginxProcess());
  chmod(n->dir_.path().c_str(), 0777);
  n->port_ = FreePort();
  std::ofstream conf(n->dir_.File("nginx.conf"));
  conf << "worker_processes 2;\npid " << n->dir_.File("nginx.pid") << ";\nerror_log " << n->dir_.File("error.log")
       << " warn;\ndaemon off;\nevents { worker_connections 4096; }\nhttp {\n  access_log off;\n"
       << "  client_body_temp_path " << n->dir_.File("body") << ";\n  proxy_temp_path " << n->dir_.File("proxy")
       << ";\n  upstream hotrow {\n";
  for (uint16_t p : upstream_ports) conf << "    server 127.0.0.1:" << p << " max_fails=3 fail_timeout=5s;\n";
  conf << "    keepalive 64;\n  }\n  server {\n    listen 127.0.0.1:" << n->port_ << ";\n"
       << "    location / {\n      proxy_pass http://hotrow;\n      proxy_http_version 1.1;\n"
       << "      proxy_set_header Connection \"\";\n      proxy_next_upstream error timeout;\n    }\n  }\n}\n";
  conf.close();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(n->dir_.File("nginx.out").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::string config = n->dir_.File("nginx.conf"), prefix = n->dir_.path();
    execlp("nginx", "nginx", "-c", config.c_str(), "-p", prefix.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  n->pid_ = pid;
  for (int i = 0; i < 200; ++i) {
    try {
      HttpClient c(n->port_, std::chrono::milliseconds(1000));
      if (c.Get("/healthz").status == 200) return n;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ADD_FAILURE() << "nginx did not come up (is the nginx-light package installed?)";
  return nullptr;
}

NginxProcess::~NginxProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGQUIT);
  int status = 0;
  for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
}

}  // namespace hotrow::testing
