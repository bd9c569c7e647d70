//! The bad-page log's copies (`log_members`): on member 0 only (`"first"`, the default),
//! or one on every member (`"all"`), as md keeps its superblock and write-intent bitmap on
//! each member, so that no single failed member takes the array's metadata with it.
//!
//! Every copy gets every record, in the same order, so a record has the same number in
//! each; a record is durable once it is durable on every copy still written (a copy on a
//! failed member, or whose device failed a log write, is no longer written: that member is
//! failed, as md fails a device whose superblock cannot be written). At start every copy is
//! read back and the one that got furthest (the highest record number; the lowest member
//! on a tie — the copies hold one sequence, so equal numbers are equal states) is the
//! array's state; the copies behind it are checkpointed with that state, numbered on from
//! it (`Journal::checkpoint_through`), before any request is served. A copy that cannot be
//! read fails its member (md does not assemble a device without a readable superblock).
//!
//! With a hot spare, `"all"` keeps one more copy at the spare's end (md writes its
//! superblock to spares too). It is read back at every start but written only once a
//! replacement is wanted: it is started over with the array's state
//! (`Journal::restart_through`), takes every record from then on like the others, and the
//! replacement is logged only once that checkpoint is durable. The member being replaced
//! keeps its own copy until the spare holds all its stripes; then that copy is no longer
//! written, so the array keeps one copy a member. A spare copy that cannot be read, or
//! whose start-over fails, fails no member: the spare is not used (md does not use a
//! spare whose superblock it cannot write). One that fails later, once the replacement is
//! logged, is no longer written; the spare serves on. A log on the spare ahead of every
//! member's copy while theirs names no replacement is not adopted (a reused spare's, or
//! records no member got), and is started over when a replacement starts.
//!
//! **Identity** (md's array UUID and device role in every superblock). Each copy's header
//! carries a label (`persist::Label`): the array's id, drawn when its log is first
//! formatted, and the copy's role — its member, or the spare. At start the array is the
//! one most members' copies name; a member's copy of another array (unless the log names
//! that member failed) or of another member stops the start before anything is written
//! (a device of another array, devices out of order); a member's copy found blank while
//! the log names it made is a swapped device, not assembled; a spare's copy of another
//! array is never adopted; and a log naming a replacement onto the spare while the spare's
//! copy is blank or another array's means the spare was swapped: the member is rebuilt
//! anew (`spare_swapped`).

use super::persist::{self, Label, Role};
use super::Raid;
use wattio_core::function::Actions;
use wattio_core::journal::{Journal, Recovery, Step, LABEL_BYTES};

/// What the copies' labels said at start ([`Raid::identify`]).
struct Identity {
    labels: Vec<Option<Label>>,
    /// Copies of another array.
    others: Vec<usize>,
    /// Why to stop if a member's copy is another array's and the log does not name that
    /// member failed.
    split: Option<String>,
}

/// One copy of the log.
pub(super) struct Copy {
    /// The member whose device holds it (`None`: the spare's).
    pub member: Option<usize>,
    pub j: Journal,
    /// No longer written: its device failed a log write, or it could not be read at start.
    pub dead: bool,
    /// Found blank at start while the log names it made ([`Raid::blank_members`]): its
    /// device was swapped for a blank one, so its member's data is gone too.
    pub blank: bool,
    /// The spare's, not written yet: until a replacement is wanted (it is started over
    /// first) or a start finds the log naming one.
    pub standby: bool,
    /// What it held at start, until every copy has answered.
    pub found: Option<Result<Recovery, String>>,
}

/// The number of the last record a recovered log holds (0: none).
fn last(r: &Recovery) -> u64 {
    r.first_seq + r.records.len() as u64 - 1
}

/// Was the copy formatted at a start that wrote nothing to it since (no checkpoint, no
/// record)? (A copy the array has written to holds its copies-made record or a checkpoint
/// of at least the entry count.)
fn formatted_only(f: &Result<Recovery, String>) -> bool {
    f.as_ref()
        .is_ok_and(|r| !r.fresh && r.records.is_empty() && r.snapshot.is_empty())
}

/// Is `label`, on a copy that holds nothing else ([`formatted_only`]), only the id a start
/// with a copy on every member drew before it knew the array's? Such a start serves
/// nothing until the log names every copy made, so the label says nothing of the device's
/// data. (A start keeping its log on the first member only serves at once: its copy's
/// label is the array's even with nothing logged.)
fn label_unproven(f: &Result<Recovery, String>, label: &Label) -> bool {
    label.all && formatted_only(f)
}

/// Did the copy never serve: blank, or only the header of a start with a copy on every
/// member ([`label_unproven`])? A log whose members' copies all never served is new.
fn never_served(f: &Result<Recovery, String>) -> bool {
    f.as_ref().is_ok_and(|r| {
        r.fresh || Label::decode(&r.label).is_ok_and(|l| l.is_some_and(|l| label_unproven(f, &l)))
    })
}

impl Raid {
    /// Was the copy formatted blank at a start after the one that made this array: only a
    /// header ([`formatted_only`]), with another start's id? (One with the array's own id
    /// was formatted when the array was made: a crash may have cut the copies-made record
    /// on its way to it while other copies got it — seed 2,048.)
    fn reformatted(&self, f: &Result<Recovery, String>) -> bool {
        formatted_only(f)
            && f.as_ref().is_ok_and(|r| {
                Label::decode(&r.label).is_ok_and(|l| l.is_some_and(|l| l.array != self.array))
            })
    }

    /// The label a copy in `role` carries in this array (`persist::Label`).
    pub(super) fn label(&self, role: Role) -> [u8; LABEL_BYTES] {
        Label {
            array: self.array,
            role,
            all: self.log_all,
        }
        .encode()
    }

    /// Copy `k`'s role.
    fn role(&self, k: usize) -> Role {
        self.logs[k].member.map_or(Role::Spare, Role::Member)
    }

    /// Which array the copies found at start are (md assembles by the array UUID in every
    /// superblock): the id most of the members' labelled copies carry (a tie stops the
    /// start), or this build's for a new array (or one whose logs predate labels). A copy
    /// of this array's in another role (devices given out of order, the spare given as a
    /// member) stops the start before anything is written to the array: its device holds
    /// another member's data. Returns the labels read (`None`: none), the copies of another
    /// array (the spare's among them: never adopted, started over if a replacement starts),
    /// and, if a member's is one, what to stop with unless the log names that member
    /// failed (a blank device in its place was formatted with a new id at the start that
    /// failed it: [`Raid::blank_members`]).
    fn identify(&mut self, found: &[Result<Recovery, String>]) -> Result<Identity, String> {
        let mut labels = Vec::with_capacity(found.len());
        for (k, f) in found.iter().enumerate() {
            let l = match f {
                Ok(r) => Label::decode(&r.label)
                    .map_err(|e| format!("the log on `{}` carries {e}", self.copy_device(k)))?,
                Err(_) => None,
            };
            labels.push(l);
        }
        // The members' arrays, each with the devices whose copies name it, most first. A
        // member's copy only formatted, by a start with a copy on every member, does not
        // vote: two crashes while a new array forms may leave its copies formatted by two
        // starts, with two ids (nothing was served: requests wait until the log names every
        // copy made), and a blank device put in a member's place is formatted with the id
        // of the start that finds it — the array's log, naming that member's copy made,
        // tells it for a swapped device ([`Raid::blank_members`]).
        let mut arrays: Vec<(u64, Vec<&str>)> = Vec::new();
        for (k, l) in labels.iter().enumerate() {
            let (Some(l), Some(_)) = (l, self.logs[k].member) else {
                continue;
            };
            if label_unproven(&found[k], l) {
                continue;
            }
            let dev = self.copy_device(k);
            match arrays.iter_mut().find(|(a, _)| *a == l.array) {
                Some((_, devs)) => devs.push(dev),
                None => arrays.push((l.array, vec![dev])),
            }
        }
        arrays.sort_by_key(|(_, devs)| std::cmp::Reverse(devs.len()));
        let split = (arrays.len() > 1).then(|| {
            let each: Vec<String> = arrays
                .iter()
                .map(|(a, devs)| format!("array {a:016x} on `{}`", devs.join("`, `")))
                .collect();
            format!(
                "the members' copies of the log belong to different arrays ({}): give the \
                 devices of one array — another array's device holds its data, not this one's",
                each.join("; ")
            )
        });
        if let [(_, x), (_, y), ..] = arrays.as_slice() {
            if x.len() == y.len() {
                return Err(split.expect("two arrays"));
            }
        }
        if let Some(&(a, _)) = arrays.first() {
            self.array = a;
        }
        let mut others = Vec::new();
        for (k, l) in labels.iter().enumerate() {
            let Some(l) = l else { continue };
            let role = self.role(k);
            if self.logs[k].member.is_some() && label_unproven(&found[k], l) {
                // Nobody's: this array's from its checkpoint on (`unlabelled`), or a
                // blank member's (`blank_members`).
                continue;
            }
            if l.array != self.array {
                others.push(k);
                continue;
            }
            if l.role != role {
                let at = match role {
                    Role::Member(m) => format!("member {m}"),
                    Role::Spare => "the spare".into(),
                };
                return Err(format!(
                    "`{}`, given as {at}, holds {} copy of this array's log (array {:016x}): \
                     give the devices in the array's order",
                    self.copy_device(k),
                    l.role,
                    self.array
                ));
            }
        }
        // From now on every copy carries this array's id (a copy that had none, or a new
        // one formatted with this build's, from its next header: `copies_recovered`
        // checkpoints such copies).
        for k in 0..self.logs.len() {
            let l = self.label(self.role(k));
            self.logs[k].j.set_label(l);
        }
        Ok(Identity {
            labels,
            others,
            split,
        })
    }

    /// The spare (copy `sp`) was swapped while the log named a replacement onto it, or its
    /// copy is `unreadable` (see `copies_recovered`): the state the copies are brought to
    /// names none. Nothing moved yet (`through` 0): the replacement is simply asked for
    /// again. Else the member's stripes below `through` were on the lost spare only (its
    /// own device, stale there or gone): it is faulty — rebuilt from the others onto the
    /// new spare, from stripe 0 — unless another member is faulty already, when rows would
    /// miss two members and the start stops, naming both.
    fn spare_swapped(
        &mut self,
        got: &mut persist::Recovered,
        sp: usize,
        unreadable: bool,
    ) -> Result<(), String> {
        let (m, through) = got.replaced.take().expect("a replacement is named");
        let spare = self.copy_device(sp).to_string();
        let lost = if unreadable {
            "cannot be read"
        } else {
            "does not hold this array's copy of the log (swapped since?)"
        };
        self.counters.swapped_spares += 1;
        if through == 0 {
            if got.faulty_member().is_none() {
                if let Some(s) = self.spare.as_mut() {
                    s.at_start_member = Some(m);
                }
            }
            return Ok(());
        }
        if let Some(f) = got.faulty_member().filter(|&f| f != m) {
            return Err(format!(
                "the log names {through} stripes of `{}` moved onto the spare, but `{spare}` \
                 {lost}, and `{}` is faulty: rows would miss two members — give the spare \
                 they were moved onto",
                self.names[m], self.names[f]
            ));
        }
        got.faulty = 1 << m;
        Ok(())
    }

    /// Is there a log (RAID-5 with `persist`)?
    #[inline]
    pub(super) fn has_log(&self) -> bool {
        !self.logs.is_empty()
    }

    /// Is copy `k` still written? (The one copy of `"first"` is, on a failed member 0 too:
    /// the array has no other.) The spare's once started over for a replacement; a
    /// member's not once that member is failed or wholly on the spare.
    fn live(&self, k: usize) -> bool {
        let c = &self.logs[k];
        if c.dead {
            return false;
        }
        match c.member {
            None => !c.standby,
            Some(_) if self.logs.len() == 1 => true,
            Some(m) => self.faulty != Some(m) && !self.wholly_replaced(m),
        }
    }

    /// The device holding copy `k`, by name.
    fn copy_device(&self, k: usize) -> &str {
        match self.logs[k].member {
            Some(m) => &self.names[m],
            None => self.spare.as_ref().map_or("spare", |s| s.name.as_str()),
        }
    }

    /// A replacement of member `m` is wanted: if the spare has a copy not written yet,
    /// start it over with the array's state (written from now on, like the others) and
    /// hold the replacement until that checkpoint is durable (`true`: held). So the
    /// members' copies name a replacement only once the spare's copy is this array's: a
    /// log found on the spare at a start while theirs name none is never adopted
    /// (another array's, on a reused spare, is then overwritten here).
    pub(super) fn start_spare_copy(&mut self, m: usize, out: &mut Actions) -> bool {
        if self.spare_copy_pending.is_some() {
            return true;
        }
        let Some(k) = self.logs.iter().position(|c| c.member.is_none()) else {
            return false;
        };
        // A used device's bytes where its copy goes (a spare this array never wrote, or a
        // device put in its place since): formatted, as md writes a spare's superblock
        // when it is added, then started over below. (Only a region that cannot be read,
        // or written, refuses the spare.)
        if self.logs[k].j.foreign() && self.logs[k].j.adopt_foreign(out).is_ok() {
            self.logs[k].dead = false;
            self.counters.adopted_copies += 1;
        }
        if self.logs[k].dead || !self.logs[k].j.ready() {
            // Its copy could not be read: md does not use a spare whose superblock it
            // cannot write (the replacement would name a spare whose copy is no proof).
            self.refuse_spare();
            return true;
        }
        if !self.logs[k].standby {
            return false;
        }
        let last = (0..self.logs.len())
            .filter(|&c| self.live(c))
            .map(|c| self.logs[c].j.last())
            .max()
            .unwrap_or(0);
        let snap = self.snapshot();
        // Started over whatever it held (blank, or another array's log on a reused spare):
        // nothing was appended to it, which is all `restart_through` asks; refused, the
        // spare serves without one.
        match self.logs[k].j.restart_through(last, &snap, out) {
            Ok(_) => {
                self.logs[k].standby = false;
                self.spare_copy_pending = Some((m, last));
                true
            }
            Err(_) => {
                self.logs[k].dead = true;
                self.refuse_spare();
                true
            }
        }
    }

    /// The spare's copy of the log cannot be written before a replacement: the spare is not
    /// used (no replacement onto it this run). So a log naming a replacement always has the
    /// spare's copy started over with this array's label durable first — and a start that
    /// finds the spare's copy blank or another array's while the log names one knows the
    /// spare was swapped (`copies_recovered`).
    fn refuse_spare(&mut self) {
        if let Some(s) = self.spare.as_mut() {
            if !s.stopped {
                s.stopped = true;
                self.counters.refused_spares += 1;
            }
        }
    }

    /// The spare's copy has started over (durable): the replacement held for it goes on; or
    /// failed: asked again, it finds the copy dead and the spare refused
    /// ([`Raid::start_spare_copy`]).
    fn spare_copy_started(&mut self, k: usize, out: &mut Actions) {
        let Some((m, last)) = self.spare_copy_pending else {
            return;
        };
        let c = &self.logs[k];
        if c.member.is_some() || !(c.dead || c.j.durable() >= last) {
            return;
        }
        self.spare_copy_pending = None;
        self.want_replacement(m, out);
    }

    /// The highest record durable on every copy still written.
    pub(super) fn log_durable(&self) -> u64 {
        (0..self.logs.len())
            .filter(|&k| self.live(k))
            .map(|k| self.logs[k].j.durable())
            .min()
            .unwrap_or(0)
    }

    /// Append a record to every copy written (each checkpointing when full): its sequence
    /// number, `None` if the log failed (reported).
    pub(super) fn log_record(&mut self, record: &[u8], out: &mut Actions) -> Option<u64> {
        let mut seq = None;
        for k in 0..self.logs.len() {
            if !self.live(k) {
                continue;
            }
            match self.logs[k].j.append(record, out) {
                Ok(s) => {
                    debug_assert!(seq.is_none_or(|x| x == s), "copies numbered alike");
                    seq = Some(s);
                }
                Err(e) => {
                    out.fail(&format!("{}: {e}", self.name));
                    return None;
                }
            }
            if self.logs[k].j.wants_snapshot() {
                let snap = self.snapshot();
                if let Err(e) = self.logs[k].j.checkpoint(&snap, out) {
                    out.fail(&format!("{}: {e}", self.name));
                }
            }
        }
        seq
    }

    /// Copy `k`'s news.
    pub(super) fn log_step(&mut self, k: usize, step: Step, out: &mut Actions) {
        match step {
            Step::Recovered(r) => {
                self.logs[k].found = Some(Ok(r));
                self.copies_recovered(out);
            }
            Step::Failed(e) if self.logs[k].found.is_none() && !self.ready => {
                self.logs[k].found = Some(Err(e));
                self.copies_recovered(out);
            }
            Step::Failed(e) => {
                self.logs[k].dead = true;
                if !(0..self.logs.len()).any(|c| self.live(c)) {
                    return self.stop(&e, out);
                }
                self.spare_copy_started(k, out);
                // A member's copy that cannot be written fails the member; the spare's
                // only leaves the spare without one.
                if let Some(m) = self.logs[k].member {
                    if self.faulty != Some(m) {
                        self.fail_member(m, out);
                    }
                }
                self.copies_durable(out);
            }
            Step::Durable(_) => {
                self.copies_durable(out);
                self.spare_copy_started(k, out);
            }
            Step::Busy | Step::NotMine => {}
        }
        self.copies_formed(out);
    }

    /// Once every member's copy written this run has its header on its device (a new
    /// copy formatted, at the first start or when `log_members` turns to `"all"`), log the
    /// copies made if the log does not name them all yet: from then on a start that finds
    /// one of them blank knows its device was swapped (`blank_members`). Not before —
    /// a copy whose format a crash lost would be taken for a swapped device.
    ///
    /// Requests wait for that record (`forming`): a write acknowledged before it could be on
    /// a member whose device a crash and a swap then leave blank, and the next start would
    /// assemble that blank copy as a format that never landed (the swarm's operator
    /// scenario, seed 523: a member blanked after a crash 49 ms into a new array lost a
    /// write acknowledged at 41 ms).
    fn copies_formed(&mut self, out: &mut Actions) {
        // Nor before the start's own records and checkpoints are durable: a copy this
        // start formatted carries its id until the checkpoint giving it the array's lands,
        // and once the log names it made, a copy holding only a header with another id is
        // a device blank at a later start ([`Raid::reformatted`]; seed 11,208: the record
        // logged before those checkpoints landed, and a crash leaving three copies with
        // only their headers, taken for three blank devices).
        if !self.log_all || !self.ready || self.broken || self.geometry_seq.is_some() {
            return;
        }
        let mut made = self.copies_made;
        for k in 0..self.logs.len() {
            let Some(m) = self.logs[k].member else {
                continue;
            };
            if !self.live(k) {
                continue;
            }
            if !self.logs[k].j.header_landed() {
                return;
            }
            made |= 1 << m;
        }
        if made != self.copies_made {
            self.copies_made = made;
            let seq = self.log_record(&persist::copies(made), out);
            if self.forming {
                self.forming = false;
                match seq {
                    Some(seq) => self.geometry_seq = Some(seq),
                    None => self.serve_early(out),
                }
            }
        } else if self.forming {
            self.forming = false;
            self.serve_early(out);
        }
    }

    /// Does a member's copy written this run lack the log's copies-made record (see
    /// [`Raid::copies_formed`])?
    pub(super) fn copies_pending(&self) -> bool {
        self.log_all
            && !self.broken
            && (0..self.logs.len()).any(|k| {
                self.live(k)
                    && self.logs[k]
                        .member
                        .is_some_and(|m| self.copies_made >> m & 1 == 0)
            })
    }

    /// Members whose copy of the log is blank while the log names it made: their devices
    /// were swapped for blank ones (or wiped). md does not assemble a device without a
    /// superblock; here such a copy is dead, so its member is failed once the array is up
    /// (its stripes rebuilt from the others, onto the spare if there is one) — or, when
    /// that would leave rows two members short, the start stops, naming them.
    fn blank_members(
        &mut self,
        found: &[Result<Recovery, String>],
        got: &persist::Recovered,
    ) -> Result<(), String> {
        let faulty = got.faulty_member();
        let whole = self.shape.wholly_replaced(got.replaced);
        let blank: Vec<usize> = (0..self.logs.len())
            .filter(|&k| {
                self.logs[k].member.is_some_and(|m| {
                    (found[k].as_ref().is_ok_and(|r| r.fresh) || self.reformatted(&found[k]))
                        && got.copies >> m & 1 == 1
                        && faulty != Some(m)
                        && whole >> m & 1 == 0
                })
            })
            .collect();
        if blank.is_empty() {
            return Ok(());
        }
        if blank.len() + usize::from(faulty.is_some()) > 1 {
            let devs: Vec<&str> = blank.iter().map(|&k| self.copy_device(k)).collect();
            let also = faulty.map_or(String::new(), |f| {
                format!(", and `{}` is faulty", self.names[f])
            });
            return Err(format!(
                "the copies of the log on `{}` are blank while the log names them made (devices \
                 swapped for blank ones?){also}: rows would miss two members — give the \
                 array's devices",
                devs.join("`, `")
            ));
        }
        self.counters.blank_members += 1;
        self.logs[blank[0]].dead = true;
        self.logs[blank[0]].blank = true;
        Ok(())
    }

    /// Members' copies whose region holds something that is not a wattio log (a used
    /// device's bytes). With the log so far on the first member only (its copy read,
    /// written by a start with `log_members = "first"` or before labels, and naming no
    /// other copy made), the others' regions were reserved but never written: each is
    /// formatted as a new copy
    /// (`Journal::adopt_foreign`), as a blank one would be — turning `"all"` on for an
    /// array on used devices once failed every such member. At a new array (every other
    /// member's copy blank, or only the header of a start with a copy on every member:
    /// nothing was ever served) the start stops naming the region, as for the first
    /// member's with the log on it alone. Else the array's copies were made, and one no
    /// longer a log was overwritten: its member is not assembled (`fail_unassembled`).
    fn foreign_copies(
        &mut self,
        found: &mut [Result<Recovery, String>],
        out: &mut Actions,
    ) -> Result<(), String> {
        let foreign: Vec<usize> = (0..self.logs.len())
            .filter(|&k| self.logs[k].member.is_some() && self.logs[k].j.foreign())
            .collect();
        let Some(&first) = foreign.first() else {
            return Ok(());
        };
        // The copies the first member's log names made: its header's label may still say
        // `first` after a start that turned `all` on logged them (the label changes with
        // the next header, a record does not carry it).
        let first_only = found[0]
            .as_ref()
            .ok()
            .filter(|r| !r.fresh && Label::decode(&r.label).is_ok_and(|l| l.is_none_or(|l| !l.all)))
            .map(|r| {
                self.shape
                    .replay(&r.snapshot, &r.records)
                    .map_or(u64::MAX, |g| g.copies)
            });
        if let Some(made) = first_only {
            for &k in &foreign {
                let m = self.logs[k].member.expect("a member's copy");
                if made >> m & 1 == 0 {
                    found[k] = Ok(self.logs[k].j.adopt_foreign(out)?);
                    self.counters.adopted_copies += 1;
                }
            }
            return Ok(());
        }
        let new = (0..self.logs.len())
            .filter(|&k| self.logs[k].member.is_some() && !foreign.contains(&k))
            .all(|k| never_served(&found[k]));
        if new {
            return Err(found[first].clone().expect_err("a foreign copy failed"));
        }
        Ok(())
    }

    /// Records durable on every copy written up to a higher number than last seen: act on
    /// them.
    fn copies_durable(&mut self, out: &mut Actions) {
        let upto = self.log_durable();
        if upto > self.log_seen {
            self.log_seen = upto;
            self.durable_upto(upto, out);
        }
    }

    /// Every copy has answered at start: take the one that got furthest, and bring the
    /// others up to it.
    fn copies_recovered(&mut self, out: &mut Actions) {
        if self.logs.iter().any(|c| c.found.is_none()) {
            return;
        }
        let mut found: Vec<Result<Recovery, String>> = self
            .logs
            .iter_mut()
            .map(|c| c.found.take().expect("checked"))
            .collect();
        if let Err(e) = self.foreign_copies(&mut found, out) {
            return self.stop(&e, out);
        }
        let proposed = self.array;
        let Identity {
            labels,
            others,
            split,
        } = match self.identify(&found) {
            Ok(x) => x,
            Err(e) => return self.stop(&e, out),
        };
        // The furthest of the copies `take` admits (the lowest on a tie).
        let furthest = |found: &[Result<Recovery, String>], take: &dyn Fn(usize) -> bool| {
            let mut best: Option<(usize, u64)> = None;
            for (k, f) in found.iter().enumerate() {
                if let Ok(r) = f {
                    if take(k) && best.is_none_or(|(_, b)| last(r) > b) {
                        best = Some((k, last(r)));
                    }
                }
            }
            best.map(|(k, _)| k)
        };
        // The spare's copy ahead of every member's is this array's only if the furthest
        // member copy names a replacement (the spare's is written from a replacement's
        // record on; a crash before the members' copies got that record loses nothing
        // durable by taking theirs). Else it is another array's log on a reused spare:
        // not adopted; a replacement starts the spare's copy over (`restart_through`).
        let spare = self.logs.iter().position(|c| c.member.is_none());
        let ours = |k: usize| !others.contains(&k);
        let mut foreign = spare.filter(|&sp| !ours(sp));
        if let Some(sp) =
            spare.filter(|&sp| foreign.is_none() && furthest(&found, &ours) == Some(sp))
        {
            let member = furthest(&found, &|k| k != sp && ours(k));
            let replacing = member.is_some_and(|m| {
                let r = found[m].as_ref().expect("furthest is read");
                self.shape
                    .replay(&r.snapshot, &r.records)
                    .is_ok_and(|g| g.replaced.is_some())
            });
            if !replacing {
                foreign = Some(sp);
            }
        }
        let best = furthest(&found, &|k| Some(k) != foreign && ours(k))
            .map(|k| (k, found[k].as_ref().expect("read")));
        let Some((b, r)) = best else {
            let e = found
                .into_iter()
                .find_map(Result::err)
                .expect("no copy read back: an error");
            return self.stop(&e, out);
        };
        let mut got = match self.shape.replay(&r.snapshot, &r.records) {
            Ok(got) => got,
            Err(e) => {
                let e = format!("the bad-page log on `{}` holds {e}", self.copy_device(b));
                return self.stop(&e, out);
            }
        };
        // A log no start ever served from is new: every member's copy blank, or holding
        // only the header a start with a copy on every member formatted (such a start
        // serves nothing until its copies-made record is logged) — a first start cut
        // before its first record. Taken as not new, `assume_clean` was dropped and a
        // bitmap array resynced every region (the operator scenario, seed 66: 244,038).
        // A copy a start on `d0` only formatted (`all` off in its label) is not: such a
        // start serves at once.
        let unserved = (0..self.logs.len())
            .filter(|&k| self.logs[k].member.is_some())
            .all(|k| never_served(&found[k]));
        let (upto, fresh) = (last(r), r.fresh || unserved);
        // The log names a replacement onto the spare, yet the spare's copy — started over
        // with this array's label before that record could be logged (`start_spare_copy`)
        // — is blank or another array's: the spare was swapped, and what the replacement
        // moved is gone with the one it was made onto.
        let labelled = labels
            .iter()
            .zip(&self.logs)
            .any(|(l, c)| l.is_some() && c.member.is_some());
        // An unreadable copy (no label) is no proof either: md does not assemble a device
        // whose superblock it cannot read, and here the moved stripes would be read from
        // a device nothing says is the one they were moved onto.
        let swapped = spare.filter(|&sp| {
            labelled && got.replaced.is_some() && labels[sp].is_none_or(|l| l.array != self.array)
        });
        if let Some(sp) = swapped {
            // (A region of another device's bytes reads back, as no log: swapped.)
            let unreadable = found[sp].is_err() && !self.logs[sp].j.foreign();
            if let Err(e) = self.spare_swapped(&mut got, sp, unreadable) {
                return self.stop(&e, out);
            }
        }
        if let Err(e) = self.blank_members(&found, &got) {
            return self.stop(&e, out);
        }
        // A member's copy of another array: its member failed in this array's log (a
        // blank device put in its place, formatted with a new id at the start that failed
        // it) is not written again; any other stops the start.
        let whole = self.shape.wholly_replaced(got.replaced);
        for &k in &others {
            let Some(m) = self.logs[k].member else {
                continue;
            };
            if got.faulty_member() != Some(m) && whole >> m & 1 == 0 {
                let e = split.expect("a member's copy of another array");
                return self.stop(&e, out);
            }
            self.logs[k].dead = true;
        }
        // The copies behind the furthest take its state (before anything else is logged:
        // the checkpoint is the replayed state, numbered as the furthest copy's last
        // record), and requests wait for them; so does a copy whose header does not carry
        // this array's id yet (a new copy, or one from before labels, formatted with this
        // build's id while the array's is another: its checkpoint's header carries it).
        let unlabelled = |k: usize| {
            Some(k) != foreign && ours(k) && labels[k].map_or(proposed, |l| l.array) != self.array
        };
        let behind: Vec<usize> = found
            .iter()
            .enumerate()
            .filter(|(k, f)| {
                f.as_ref().is_ok_and(|x| {
                    last(x) < upto || unlabelled(*k) || (swapped.is_some() && Some(*k) != swapped)
                })
            })
            .map(|(k, _)| k)
            .collect();
        self.faulty = got.faulty_member();
        self.copies_made = got.copies;
        // Which copies are written from now on depends on the replacement too (the spare's
        // once one has started; not a member's the spare wholly holds).
        if let Some(s) = self.spare.as_mut() {
            if let Some((m, through)) = got.replaced {
                s.member = Some(m);
                s.through = through;
                for c in self.logs.iter_mut().filter(|c| c.member.is_none()) {
                    c.standby = false;
                }
            }
        }
        let unreadable: Vec<usize> = found
            .iter()
            .enumerate()
            .filter(|(_, f)| f.is_err())
            .map(|(k, _)| k)
            .collect();
        for k in unreadable {
            self.logs[k].dead = true;
        }
        // The copies behind are checkpointed with the state taken — and so is every other
        // copy written, all through the record after the last found: that number is durable
        // only once every checkpoint has landed, which requests wait for. (Through the last
        // found, a copy behind only in its label or its state — at the same number — was
        // durable at once, and the start waited for ever: a spare whose copy could not be
        // read under a replacement.)
        let mut align = None;
        if behind.iter().any(|&k| self.live(k)) {
            let snap = self.shape.snapshot(
                got.bad.iter(),
                got.faulty_member(),
                got.replaced,
                got.copies,
                &got.bitmap,
            );
            for k in 0..self.logs.len() {
                if !self.live(k) {
                    continue;
                }
                if let Err(e) = self.logs[k].j.checkpoint_through(upto + 1, &snap, out) {
                    return self.stop(&e, out);
                }
            }
            align = Some(upto + 1);
        }
        // What every copy written holds now (the copies behind: their own last record,
        // until their checkpoints land).
        self.log_seen = self.log_durable();
        self.recovered(got, fresh, align, out);
    }

    /// A member whose copy could not be read is not assembled (md's rule), nor one whose
    /// copy failed its first write or is found blank while the log names it made: failed,
    /// if it can be (another member failed already: its data still serves) — as the array
    /// comes up, before a request that waited for the start is served (a read sent at
    /// once got a blank member's zeros in the live test of blank members).
    ///
    /// `blank`: only the member whose copy was found blank, or only the others. A blank
    /// member's data is gone, so it is failed first — before the operator's `fail` and
    /// before a member whose copy alone is lost: that one's data still serves. (Failed in
    /// copy order, a member whose copy could not be read was failed before a blank one
    /// after it, which then served its zeros: the swarm's operator scenario, seed 139.)
    pub(super) fn fail_unassembled(&mut self, blank: bool, out: &mut Actions) {
        for k in 0..self.logs.len() {
            let Some(m) = self.logs[k].member else {
                continue;
            };
            let c = &self.logs[k];
            if c.dead && c.blank == blank && self.faulty != Some(m) && !self.broken {
                self.fail_member(m, out);
            }
        }
    }
}
