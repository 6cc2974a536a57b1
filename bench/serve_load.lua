-- wrk script for bench/serve_load.sh: each request posts SENTENCES sentences (the environment variable,
-- default 1) taken in turn from the file SOURCES (one sentence a line) to POST /translate, with BEAM;
-- with ONMT_ID set, to OpenNMT-py's POST /translator/translate as [{"src": ..., "id": ONMT_ID}] (its
-- server's search is its configuration's). At the end one line of JSON: requests, errors by kind,
-- latency percentiles in milliseconds.
local sentences = {}
local per_request = tonumber(os.getenv("SENTENCES") or "1")
local beam = tonumber(os.getenv("BEAM") or "5")
local onmt_id = os.getenv("ONMT_ID")
local path = onmt_id and "/translator/translate" or "/translate"
local next_sentence = 1

local function json_string(text)
  return '"' .. text:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' elseif c == "\\" then return "\\\\" end
    return string.format("\\u%04x", c:byte())
  end) .. '"'
end

function init(args)
  for line in io.lines(os.getenv("SOURCES")) do sentences[#sentences + 1] = line end
  -- Each wrk thread starts at its own place in the file.
  next_sentence = (math.floor(math.random() * #sentences) % #sentences) + 1
end

function request()
  local batch = {}
  for i = 1, per_request do
    local text = json_string(sentences[next_sentence])
    batch[i] = onmt_id and ('{"src": ' .. text .. ', "id": ' .. onmt_id .. '}') or text
    next_sentence = next_sentence % #sentences + 1
  end
  local body = onmt_id and ('[' .. table.concat(batch, ", ") .. ']')
                       or ('{"src": [' .. table.concat(batch, ", ") .. '], "beam": ' .. beam .. '}')
  return wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "seconds": %.3f, "errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_ms": {"p50": %.2f, "p99": %.2f, "max": %.2f}}\n',
    summary.requests, summary.duration / 1e6, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
