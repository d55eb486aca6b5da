-- wrk: one fresh refund request per call (POST /v1/payments/{id}/refunds, 0.01 EUR), over the
-- succeeded payments listed one per line in BENCH_PAYMENTS, each thread starting at its own
-- offset and walking the list round robin, so that concurrent refunds seldom queue on one payment.
-- Environment: PAYRECON_API_KEY, BENCH_RUN (makes keys unique across runs), BENCH_PAYMENTS.
local counter = 0
local threads = {}
local key = os.getenv("PAYRECON_API_KEY")
local run = os.getenv("BENCH_RUN") or "run"
local payments = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(os.getenv("BENCH_PAYMENTS")) do
    if line ~= "" then
      table.insert(payments, line)
    end
  end
  if #payments == 0 then
    error("BENCH_PAYMENTS lists no payment")
  end
  -- `threads` is the main state's (setup runs there): each thread only knows its own number.
  counter = (tid - 1) * 7919
end

request = function()
  counter = counter + 1
  local payment = payments[(counter - 1) % #payments + 1]
  local ref = run .. "-refund-" .. tid .. "-" .. counter
  return wrk.format("POST", "/v1/payments/" .. payment .. "/refunds", {
    ["Authorization"] = "Bearer " .. key,
    ["Idempotency-Key"] = ref,
    ["Content-Type"] = "application/json",
  }, '{"amount": 1, "reason": "requested_by_customer", "metadata": {"bench": "' .. run .. '"}}')
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
