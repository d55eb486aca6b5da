-- wrk: one fresh create-payment request per call, keys unique per wrk thread and run.
-- Environment: PAYRECON_API_KEY, BENCH_RUN (a prefix that makes keys unique across runs).
local counter = 0
local threads = {}
local key = os.getenv("PAYRECON_API_KEY")
local run = os.getenv("BENCH_RUN") or "run"
local mode = os.getenv("BENCH_MODE") or "fresh" -- fresh | replay | hot
local replay_span = tonumber(os.getenv("BENCH_REPLAY_SPAN") or "400")

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

local function body(ref)
  return '{"amount": 1999, "currency": "EUR", "merchant_reference": "' .. ref ..
         '", "provider": "stripe", "payment_method": "pm_card_visa", "customer": "cus_bench",' ..
         ' "metadata": {"bench": "' .. run .. '"}}'
end

request = function()
  counter = counter + 1
  local ref
  if mode == "fresh" then
    ref = run .. "-" .. tid .. "-" .. counter
  elseif mode == "replay" then
    ref = run .. "-" .. tid .. "-" .. ((counter - 1) % replay_span + 1)
  else
    ref = run .. "-hot-" .. ((counter - 1) % 10 + 1)
  end
  return wrk.format("POST", "/v1/payments", {
    ["Authorization"] = "Bearer " .. key,
    ["Idempotency-Key"] = ref,
    ["Content-Type"] = "application/json",
  }, body(ref))
end

local non2xx = 0
response = function(status, headers, body)
  if status ~= 202 then
    non2xx = non2xx + 1
    if non2xx <= 3 then
      io.stderr:write("unexpected status " .. status .. ": " .. body .. "\n")
    end
  end
end
