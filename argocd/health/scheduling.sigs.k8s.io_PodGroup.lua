-- Argo CD health of a Koordinator (scheduler-plugins) PodGroup (scheduling.sigs.k8s.io/v1alpha1), from
-- status.phase (Pending, PreScheduling, Scheduling, Scheduled, Running, Finished, Failed) and the counts
-- status.scheduled, status.running, status.succeeded and status.failed.
hs = {}
local status = obj.status or {}
local phase = status.phase or ""
local want = (obj.spec or {}).minMember or 0
local function counts()
  return string.format("%d scheduled, %d running, %d succeeded, %d failed of minMember %d",
    status.scheduled or 0, status.running or 0, status.succeeded or 0, status.failed or 0, want)
end
if phase == "Failed" or (status.failed or 0) > 0 then
  hs.status = "Degraded"
  hs.message = "Gang failed: " .. counts()
elseif phase == "Running" or phase == "Finished" or phase == "Scheduled" then
  hs.status = "Healthy"
  hs.message = "Gang " .. string.lower(phase) .. ": " .. counts()
else
  hs.status = "Progressing"
  if phase == "" then
    hs.message = "Waiting for koord-scheduler"
  else
    hs.message = "Gang " .. phase .. ": " .. counts()
  end
end
return hs
