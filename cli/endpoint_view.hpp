#pragma once
// What `endpoint` and `deliveries` share (cmd_endpoint.cpp).

#include "services/endpoints.hpp"

#include <nlohmann/json.hpp>
#include <string>

namespace payrecon::cli {

nlohmann::ordered_json endpoint_json(const store::EndpointRow& e);
// `id` if it is a UUID; UsageError otherwise.
std::string endpoint_id_or_refuse(const std::string& id);

} // namespace payrecon::cli
