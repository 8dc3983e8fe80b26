-- Argo CD health of a Volcano PodGroup (scheduling.volcano.sh/v1beta1), from status.phase (Pending, Inqueue,
-- Running, Unknown, Completed), the counts status.running, status.succeeded and status.failed, and the
-- scheduler's Unschedulable condition. Unknown means some pods run but fewer than minMember.
hs = {}
local status = obj.status or {}
local phase = status.phase or ""
local want = (obj.spec or {}).minMember or 0
local function counts()
  return string.format("%d running, %d succeeded, %d failed of minMember %d",
    status.running or 0, status.succeeded or 0, status.failed or 0, want)
end
local unschedulable = nil
for _, c in ipairs(status.conditions or {}) do
  if c.type == "Unschedulable" and c.status == "True" then
    unschedulable = c.message or c.reason or "Unschedulable"
  end
end
if (status.failed or 0) > 0 or phase == "Unknown" then
  hs.status = "Degraded"
  hs.message = "Gang broken (" .. (phase ~= "" and phase or "no phase") .. "): " .. counts()
elseif phase == "Running" or phase == "Completed" then
  hs.status = "Healthy"
  hs.message = "Gang " .. string.lower(phase) .. ": " .. counts()
else
  hs.status = "Progressing"
  if phase == "" then
    hs.message = "Waiting for the Volcano scheduler"
  elseif unschedulable then
    hs.message = "Gang " .. phase .. ", unschedulable: " .. unschedulable
  else
    hs.message = "Gang " .. phase .. ": " .. counts()
  end
end
return hs
