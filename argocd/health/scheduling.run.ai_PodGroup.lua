-- Argo CD health of a KAI scheduler PodGroup (scheduling.run.ai/v2alpha2), from its status:
--   status.resourcesStatus.allocated  resources the gang's running pods hold (KAI podgroup-controller)
--   status.schedulingConditions[]     UnschedulableOnNodePool, status "True", written by the scheduler only
--                                     while none of the gang is allocated; kept after it is scheduled
hs = {}
local status = obj.status
if status ~= nil and status.resourcesStatus ~= nil and status.resourcesStatus.allocated ~= nil then
  for _, value in pairs(status.resourcesStatus.allocated) do
    if value ~= 0 and value ~= "0" then
      hs.status = "Healthy"
      hs.message = "Gang scheduled: its pods hold resources"
      return hs
    end
  end
end
if status ~= nil and status.schedulingConditions ~= nil and #status.schedulingConditions > 0 then
  local last = status.schedulingConditions[#status.schedulingConditions]
  if last.type == "UnschedulableOnNodePool" and last.status == "True" then
    hs.status = "Degraded"
    local pool = last.nodePool or ""
    local message = last.message or last.reason or "Unschedulable"
    if last.reasons ~= nil and #last.reasons > 0 and last.reasons[1].message ~= nil then
      message = last.reasons[1].message
    end
    if pool ~= "" then
      hs.message = "Unschedulable on node pool " .. pool .. ": " .. message
    else
      hs.message = "Unschedulable: " .. message
    end
    return hs
  end
end
hs.status = "Progressing"
hs.message = "Waiting for the scheduler to place the gang"
return hs
