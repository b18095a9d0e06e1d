// Run under a real `mpirun -np 4`: each rank binds a ZeroMQ socket on its own loopback address
// (127.0.0.<rank+1>), the endpoints are exchanged with the bootstrap, and every rank sends a
// message to every other rank's endpoint. A rank that connected to the wrong address would not
// hear from its peers. Exit code 0 on every rank means the exchange is right.
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <iostream>

#include "common/error.h"
#include "common/message_socket.h"
#include "common/mpi_bootstrap.h"
#include "proto/leap.capnp.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    auto info = leap::launch_info(MPI_COMM_WORLD);
    extern char** environ;
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    leap::check_launch(info.size, env);
    zmq::context_t ctx;
    leap::MessageSocket inbox(ctx, zmq::socket_type::pull);
    std::string mine = inbox.bind("tcp://127.0.0." + std::to_string(info.rank + 1) + ":*");
    auto all = leap::allgather_strings(MPI_COMM_WORLD, mine);
    if (all[static_cast<size_t>(info.rank)] != mine) throw leap::LeapError("own endpoint not at own rank");
    std::vector<std::unique_ptr<leap::MessageSocket>> out;
    for (int r = 0; r < info.size; ++r) {
      if (r == info.rank) continue;
      out.push_back(std::make_unique<leap::MessageSocket>(ctx, zmq::socket_type::push));
      out.back()->connect(all[static_cast<size_t>(r)]);
      capnp::MallocMessageBuilder msg;
      auto hello = msg.initRoot<leap::proto::EvaldHello>();
      hello.setPid(info.rank);
      out.back()->send(msg);
    }
    std::vector<bool> heard(static_cast<size_t>(info.size), false);
    for (int n = 0; n < info.size - 1; ++n) {
      auto frame = inbox.receive(std::chrono::milliseconds(10000));
      if (!frame) throw leap::LeapError("rank " + std::to_string(info.rank) + " heard from only " + std::to_string(n));
      capnp::FlatArrayMessageReader reader(*frame);
      heard[static_cast<size_t>(reader.getRoot<leap::proto::EvaldHello>().getPid())] = true;
    }
    for (int r = 0; r < info.size; ++r)
      if (r != info.rank && !heard[static_cast<size_t>(r)]) throw leap::LeapError("no message from rank " + std::to_string(r));
    MPI_Barrier(MPI_COMM_WORLD);
    if (info.rank == 0)
      std::cout << "bootstrap ok: " << info.size << " ranks, roles " << leap::to_string(leap::role_of(0)) << ", "
                << leap::to_string(leap::role_of(1)) << ", " << leap::to_string(leap::role_of(2)) << "; local size "
                << info.local_size << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bootstrap_check: " << e.what() << std::endl;
    status = 1;
  }
  MPI_Finalize();
  return status;
}
