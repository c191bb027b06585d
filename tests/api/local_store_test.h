// A fixture base for tests of the worker's parts: a real object store served in this process, a
// client of it, and a registry of functions, in a temp folder of the test's own.
#pragma once

#include <cstdint>
#include <memory>

#include <gtest/gtest.h>

#include "airt/internal/function_registry.h"
#include "objectstore/object_store.h"
#include "tests/testing/test_support.h"

namespace airt::testing {

class LocalStoreTest : public ::testing::Test {
 protected:
  // Serves a store of `capacity` bytes and connects client_ to it; a failure is fatal (call it
  // through ASSERT_NO_FATAL_FAILURE).
  void StartStore(uint64_t capacity) {
    objectstore::StoreOptions options;
    options.socket_path = dir_.File("store.sock");
    options.capacity_bytes = capacity;
    options.prefault = false;
    auto server = objectstore::StoreServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    auto client = objectstore::StoreClient::Connect(options.socket_path);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  TempDir dir_;
  std::unique_ptr<objectstore::StoreServer> server_;
  std::unique_ptr<objectstore::StoreClient> client_;
  internal::FunctionRegistry registry_;
};

}  // namespace airt::testing
