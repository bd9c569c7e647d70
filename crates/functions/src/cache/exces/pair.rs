//! The pair's identity (`pair_label`): what ties a disk to the flash card that caches it.
//!
//! The paper keeps the map on the card only, so nothing on the disk says a card holds its
//! newer pages: a card blanked or swapped while the machine is off was taken as a new (or
//! another disk's) cache — the pages it held dirty read stale from the disk, or another
//! disk's pages written over this one's. bcache keeps a superblock on the backing device
//! too, naming its cache set and whether it is dirty, and will not run a dirty backing
//! device without its cache. Here:
//!
//! - a small [`Journal`](wattio_core::journal::Journal) at the disk's end (the exported
//!   volume shrinks by [`disk_region_len`]) whose label names the pair and the disk's role,
//!   and whose snapshot is the disk's **state**: [`State::Open`] (a session is serving, or
//!   stopped without its clean unload: the card may hold pages newer than the disk) or
//!   [`State::Clean`] (the clean unload wrote every dirty page back and flushed the disk);
//! - the card's map log labelled with the same pair id and the card's role.
//!
//! At start both are read back and [`decide`] says whether the pair may be served: the
//! card must be the disk's own while the disk is open; a card holding another disk's pages
//! is never served over this one; a disk region holding bytes that are not a pair label
//! (a disk used without the label) is never overwritten. After a clean stop the card's
//! entries are dropped: the disk holds every page, and so a disk used alone between two
//! sessions is not served the card's older copies (bcache's stale data after a late
//! attach). A start writes the card's label first, then the disk's `Open`, and serves once
//! both are durable: an open disk always names a card that carries its label.

use wattio_core::journal::{JournalConfig, LABEL_BYTES};

/// The disk log's owner name.
pub const OWNER: &str = "exces-pair";
/// Bytes of the disk's state (the snapshot): one.
pub const STATE_BYTES: u64 = 1;

/// Bytes of the label region at the disk's end: two headers, two snapshot slots, one
/// journal block (unused: every state change is a checkpoint, two writes, twice a session).
pub fn disk_region_len() -> u64 {
    JournalConfig::region_len(STATE_BYTES, 4096)
}

/// Which side of the pair a log is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Disk,
    Card,
}

/// A log's label: the pair's id and the log's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label {
    pub pair: u64,
    pub role: Role,
}

/// Bytes 9..12 of a label: says the rest is an EXCES pair's.
const MAGIC: &[u8; 3] = b"XCS";

impl Label {
    pub fn encode(&self) -> [u8; LABEL_BYTES] {
        let mut b = [0; LABEL_BYTES];
        b[..8].copy_from_slice(&self.pair.to_le_bytes());
        b[8] = match self.role {
            Role::Disk => 1,
            Role::Card => 2,
        };
        b[9..12].copy_from_slice(MAGIC);
        b
    }

    /// `None` for no label (zeros: a new log, or one written before pair labels).
    pub fn decode(b: &[u8; LABEL_BYTES]) -> Result<Option<Label>, String> {
        if b.iter().all(|&x| x == 0) {
            return Ok(None);
        }
        let pair = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let role = match b[8] {
            1 => Role::Disk,
            2 => Role::Card,
            _ => return Err(format!("a label that is not an EXCES pair's ({b:02x?})")),
        };
        if &b[9..12] != MAGIC || b[12..].iter().any(|&x| x != 0) || pair == 0 {
            return Err(format!("a label that is not an EXCES pair's ({b:02x?})"));
        }
        Ok(Some(Label { pair, role }))
    }
}

/// The disk's state, its label log's snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Served since its last clean unload: the card may hold pages newer than the disk.
    Open,
    /// Its clean unload wrote every dirty page back and flushed the disk.
    Clean,
}

impl State {
    pub fn encode(self) -> [u8; 1] {
        [match self {
            State::Open => 1,
            State::Clean => 2,
        }]
    }

    /// From the snapshot: empty (a label formatted by a start that never opened — it
    /// served nothing) is clean.
    pub fn decode(snapshot: &[u8]) -> Result<State, String> {
        match snapshot {
            [] | [2] => Ok(State::Clean),
            [1] => Ok(State::Open),
            _ => Err(format!(
                "a pair state of {} byte(s) {snapshot:02x?}, expected 01 (open) or 02 (clean)",
                snapshot.len()
            )),
        }
    }
}

/// What the disk's label region held at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskFound {
    /// Zeros: a disk never labelled.
    Blank,
    /// The label of pair `pair` in `state`.
    Labelled { pair: u64, state: State },
    /// Bytes that are not a wattio log: a disk used without the label.
    Foreign,
    /// Unreadable, another owner's log, or a bad label or state.
    Unusable(String),
}

/// What the card's map log held at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CardFound {
    /// Its pair (`None`: blank, or a log from before pair labels).
    pub pair: Option<u64>,
    /// Disk pages its map holds.
    pub pages: usize,
}

/// Where things are, for the errors.
pub struct Names<'a> {
    pub disk: &'a str,
    pub flash: &'a str,
    /// The disk's label region (offset, bytes).
    pub disk_region: (u64, u64),
    /// The card's map region (offset, bytes).
    pub card_region: (u64, u64),
}

/// How to start a pair that may be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The pair's id: both logs carry it once the start is over.
    pub pair: u64,
    /// Keep the card's entries (every one dirty, as the paper's recovery); else drop them.
    pub keep: bool,
}

/// May the pair be served, and how? `new` is the id a new pair gets.
pub fn decide(
    disk: &DiskFound,
    card: CardFound,
    new: u64,
    n: &Names<'_>,
) -> Result<Decision, String> {
    let (disk_name, flash) = (n.disk, n.flash);
    let zero_disk = format!(
        "zero `{disk_name}`'s bytes {}..{} (its pair label)",
        n.disk_region.0,
        n.disk_region.0 + n.disk_region.1
    );
    let zero_card = format!(
        "zero `{flash}`'s bytes {}..{} (its map)",
        n.card_region.0,
        n.card_region.0 + n.card_region.1
    );
    // A card's pair, or a card (or disk) from before pair labels.
    let of = |c: Option<u64>, what: &str| match c {
        Some(c) => format!("pair {c:016x}'s {what}"),
        None => format!("a {what} from before pair labels"),
    };
    match *disk {
        DiskFound::Foreign => Err(format!(
            "`{disk_name}`'s bytes {}..{}, where the pair label goes, hold data that is not one (a disk used without this cache, or with it before pair labels): they would be overwritten. Set pair_label = false to serve it without a label, or {zero_disk} if they hold nothing",
            n.disk_region.0,
            n.disk_region.0 + n.disk_region.1
        )),
        DiskFound::Unusable(ref e) => Err(format!("the pair label on `{disk_name}`: {e}")),
        DiskFound::Blank => match card.pair {
            Some(c) if card.pages > 0 => Err(format!(
                "`{flash}` caches {} page(s) of pair {c:016x}'s disk, and `{disk_name}` carries no pair label (another disk, or its label was erased): they are not its pages. Serve the card with its own disk, or {zero_card} to use it here empty",
                card.pages
            )),
            // A card from before pair labels over an unlabelled disk: the pair as it was
            // (its entries dirty, as before labels).
            None if card.pages > 0 => Ok(Decision { pair: new, keep: true }),
            c => Ok(Decision {
                pair: c.unwrap_or(new),
                keep: false,
            }),
        },
        DiskFound::Labelled { pair: d, state } => {
            if card.pair == Some(d) {
                return Ok(Decision {
                    pair: d,
                    keep: state == State::Open,
                });
            }
            let card_is = match card.pair {
                None if card.pages == 0 => "blank".to_string(),
                c => of(c, "card"),
            };
            if state == State::Open {
                return Err(format!(
                    "`{disk_name}` (pair {d:016x}) was not unloaded cleanly: its own card may hold pages newer than the disk, and `{flash}` is {card_is}. Put its own card back; to serve the disk as it is, losing those pages, {zero_disk}"
                ));
            }
            if card.pages > 0 {
                return Err(format!(
                    "`{flash}` caches {} page(s) of {}, not of `{disk_name}` (pair {d:016x}, unloaded cleanly): serving them here would write another disk's pages over this one's. Serve the card with its own disk, or {zero_card} to use it here empty",
                    card.pages,
                    of(card.pair, "disk")
                ));
            }
            // A clean disk and an empty card: the card joins the pair.
            Ok(Decision {
                pair: d,
                keep: false,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: Names<'static> = Names {
        disk: "disk",
        flash: "ecd",
        disk_region: (1000 * 4096, 5 * 4096),
        card_region: (16 * 4096, 12 * 4096),
    };

    fn card(pair: Option<u64>, pages: usize) -> CardFound {
        CardFound { pair, pages }
    }

    fn labelled(pair: u64, state: State) -> DiskFound {
        DiskFound::Labelled { pair, state }
    }

    #[test]
    fn labels_and_states_round_trip_and_refuse_other_bytes() {
        for role in [Role::Disk, Role::Card] {
            let l = Label { pair: 0xABCD, role };
            assert_eq!(Label::decode(&l.encode()), Ok(Some(l)));
        }
        assert_eq!(Label::decode(&[0; LABEL_BYTES]), Ok(None));
        let mut b = Label {
            pair: 7,
            role: Role::Card,
        }
        .encode();
        assert_eq!(&b[..12], &[7, 0, 0, 0, 0, 0, 0, 0, 2, b'X', b'C', b'S']);
        b[8] = 3;
        assert!(Label::decode(&b)
            .unwrap_err()
            .starts_with("a label that is not"));
        // A RAID-5 member's label (array id, role, `all` flag) is not a pair's.
        let mut raid = [0; LABEL_BYTES];
        raid[..8].copy_from_slice(&5u64.to_le_bytes());
        raid[8] = 1;
        raid[12] = 1;
        assert!(Label::decode(&raid).is_err());
        for s in [State::Open, State::Clean] {
            assert_eq!(State::decode(&s.encode()), Ok(s));
        }
        assert_eq!(State::decode(&[]), Ok(State::Clean));
        assert_eq!(
            State::decode(&[9, 9]).unwrap_err(),
            "a pair state of 2 byte(s) [09, 09], expected 01 (open) or 02 (clean)"
        );
    }

    #[test]
    fn the_decision_table_by_hand() {
        let ok = |pair, keep| Ok(Decision { pair, keep });
        let d = |disk: DiskFound, c: CardFound| decide(&disk, c, 99, &NAMES);
        // A new pair: both blank, or a card of a start cut before the disk was labelled.
        assert_eq!(d(DiskFound::Blank, card(None, 0)), ok(99, false));
        assert_eq!(d(DiskFound::Blank, card(Some(4), 0)), ok(4, false));
        // A pair from before labels: its entries kept, dirty.
        assert_eq!(d(DiskFound::Blank, card(None, 3)), ok(99, true));
        // The same pair: entries kept (dirty) only if the disk is open.
        assert_eq!(d(labelled(4, State::Open), card(Some(4), 3)), ok(4, true));
        assert_eq!(d(labelled(4, State::Clean), card(Some(4), 3)), ok(4, false));
        // A clean disk takes an empty card, blank or another pair's.
        assert_eq!(d(labelled(4, State::Clean), card(None, 0)), ok(4, false));
        assert_eq!(d(labelled(4, State::Clean), card(Some(5), 0)), ok(4, false));
        // Refused: each says what it found and what to do.
        let e = d(DiskFound::Blank, card(Some(4), 3)).unwrap_err();
        assert!(e.starts_with("`ecd` caches 3 page(s) of pair 0000000000000004's disk, and `disk` carries no pair label"), "{e}");
        assert!(
            e.ends_with("zero `ecd`'s bytes 65536..114688 (its map) to use it here empty"),
            "{e}"
        );
        let e = d(labelled(4, State::Open), card(None, 0)).unwrap_err();
        assert!(e.starts_with("`disk` (pair 0000000000000004) was not unloaded cleanly: its own card may hold pages newer than the disk, and `ecd` is blank."), "{e}");
        assert!(
            e.ends_with("zero `disk`'s bytes 4096000..4116480 (its pair label)"),
            "{e}"
        );
        let e = d(labelled(4, State::Open), card(Some(5), 0)).unwrap_err();
        assert!(
            e.contains("and `ecd` is pair 0000000000000005's card."),
            "{e}"
        );
        let e = d(labelled(4, State::Open), card(None, 2)).unwrap_err();
        assert!(
            e.contains("and `ecd` is a card from before pair labels."),
            "{e}"
        );
        let e = d(labelled(4, State::Clean), card(Some(5), 2)).unwrap_err();
        assert!(e.starts_with("`ecd` caches 2 page(s) of pair 0000000000000005's disk, not of `disk` (pair 0000000000000004, unloaded cleanly)"), "{e}");
        let e = d(DiskFound::Foreign, card(None, 0)).unwrap_err();
        assert!(e.starts_with("`disk`'s bytes 4096000..4116480, where the pair label goes, hold data that is not one"), "{e}");
        assert!(e.contains("Set pair_label = false"), "{e}");
        let e = d(DiskFound::Unusable("reading failed".into()), card(None, 0)).unwrap_err();
        assert_eq!(e, "the pair label on `disk`: reading failed");
    }
}
