-- Rate limiting for the shop's scripts.
local M = {}

local function bucket(key)
  return "rate:" .. key
end

function M.allow(key, limit)
  local count = M.count(bucket(key))
  return count < limit
end

function M.count(name)
  return 0
end

return M
