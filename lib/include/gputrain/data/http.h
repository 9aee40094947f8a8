#pragma once
// One HTTP request with its whole answer in memory, over the libcurl that
// `datasets download` fetches with (lib/src/data/readers/http_get.cpp, the only code
// that sees libcurl): the MLflow tracking client's transport.
#include <string>

namespace gputrain::data {

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT
  std::string url;
  std::string content_type;  // of `body`; "" sends none
  std::string body;
  long timeout_s = 30;  // the whole request, connecting included
};

struct HttpResponse {
  long status = 0;    // 0: no answer came (`error` says why)
  std::string body;   // what the server answered
  std::string error;  // libcurl's reason when no answer came
};

// Never throws for the network: a server that cannot be reached, or that
// answers with an error status, is in the response for the caller to judge.
HttpResponse http_request(const HttpRequest& request);

}  // namespace gputrain::data
