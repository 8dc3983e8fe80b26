-- Argo CD health of an NVIDIA DRA driver ComputeDomain (resource.nvidia.com/v1beta1), from status.status
-- (Ready or NotReady, NotReady by default) and status.nodes[].status. The CRD has no failed state, so a
-- domain that is not ready yet is Progressing, with how many of its nodes are ready.
hs = {}
local status = obj.status
if status == nil or status.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the ComputeDomain controller"
  return hs
end
local ready, total = 0, 0
if status.nodes ~= nil then
  for _, node in ipairs(status.nodes) do
    total = total + 1
    if node.status == "Ready" then
      ready = ready + 1
    end
  end
end
if status.status == "Ready" then
  hs.status = "Healthy"
  hs.message = string.format("ComputeDomain ready (%d nodes)", total)
else
  hs.status = "Progressing"
  hs.message = string.format("ComputeDomain not ready: %d of %d nodes ready", ready, total)
end
return hs
