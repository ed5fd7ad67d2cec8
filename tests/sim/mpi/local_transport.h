// An in-process Transport for the sim/mpi tests: the ranks are threads of the test, each with
// its own LocalTransport over one LocalHub (a FIFO per ordered pair of ranks).
#ifndef FEDSCHED_TESTS_SIM_MPI_LOCAL_TRANSPORT_H_
#define FEDSCHED_TESTS_SIM_MPI_LOCAL_TRANSPORT_H_

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "sim/mpi/transport.h"

namespace fedsched::sim::mpi {

class LocalHub {
 public:
  explicit LocalHub(int size) : size_(size), queues_(size * size) {}
  int size() const { return size_; }
  void Put(int from, int to, Transport::Message m) {
    std::lock_guard<std::mutex> lock(mu_);
    queues_[from * size_ + to].push_back(std::move(m));
    cv_.notify_all();
  }
  Transport::Message Take(int from, int to) {
    std::unique_lock<std::mutex> lock(mu_);
    std::deque<Transport::Message>& q = queues_[from * size_ + to];
    cv_.wait(lock, [&] { return !q.empty(); });
    Transport::Message m = std::move(q.front());
    q.pop_front();
    return m;
  }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<Transport::Message>> queues_;
};

class LocalTransport : public Transport {
 public:
  LocalTransport(LocalHub* hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  absl::Status Send(int to, int tag, const std::string& bytes) override {
    if (to < 0 || to >= size() || to == rank_) return absl::InvalidArgumentError("bad rank");
    hub_->Put(rank_, to, Message{tag, bytes});
    return absl::OkStatus();
  }
  absl::StatusOr<Message> Receive(int from) override {
    if (from < 0 || from >= size() || from == rank_) return absl::InvalidArgumentError("bad rank");
    return hub_->Take(from, rank_);
  }
  [[noreturn]] void Abort(int code) override { std::abort(); }

 private:
  LocalHub* hub_;
  int rank_;
};

}  // namespace fedsched::sim::mpi

#endif  // FEDSCHED_TESTS_SIM_MPI_LOCAL_TRANSPORT_H_
