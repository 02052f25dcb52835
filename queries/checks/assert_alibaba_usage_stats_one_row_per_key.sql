-- one row per task in fct_alibaba_task_usage_stats and per container in
-- fct_alibaba_container_usage_stats
select 'task' as level, job_name || '/' || task_name as key, count(*) as n
from fct_alibaba_task_usage_stats
group by job_name, task_name
having count(*) > 1
union all
select 'container' as level, container_id as key, count(*) as n
from fct_alibaba_container_usage_stats
group by container_id
having count(*) > 1
