-- the machines in state USING are among the present ones; the counts never go negative and the
-- present machines only grow (a machine is present from its first event on)
select
    time,
    machines,
    using_machines,
    cpus,
    using_cpus,
from agg_alibaba_machine_capacity
where using_machines < 0
    or using_machines > machines
    or using_cpus < 0
    or using_cpus > cpus
    or joins < 0
