-- every batch_task / batch_instance row has exactly one first state (prev_state null) in
-- fct_alibaba_task_transitions, and at most two transitions
select
    level,
    source_file,
    source_row,
    count(*) filter (where prev_state is null) as first_states,
    count(*) as transitions,
from fct_alibaba_task_transitions
group by level, source_file, source_row
having count(*) filter (where prev_state is null) <> 1 or count(*) > 2
