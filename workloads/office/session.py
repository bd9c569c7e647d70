"""BLTK's Office workload, replayed on LibreOffice through UNO.

BLTK (Intel's Battery Life Toolkit, the benchmark of the EXCES paper) drives OpenOffice.org
with synthetic X key events from a scenario: start Writer on a sample document, type three
short texts at 150 ms a keystroke, find-and-replace, save, quit; the same for a Calc sheet
(type a small pay table, two formulas, save, quit) and a Draw picture (duplicate a picture,
move it, type over it, insert a spreadsheet object, save, quit). Each round is given 720 s
(`BLTK_WL_TIME`); what the scenario leaves of it the machine idles with the display off.

There is no X server here, so the keystrokes become the UNO calls that have the same effect on
the documents (the characters typed one by one, the replace, the cells and formulas, the
shapes), and every pause of the scenario is kept: a keystroke's own delay, the DELAYs between
steps. The office suite itself is the real program: it runs from a copy on the traced volume
(program, shared data, user profile and documents), so its start-ups, profile writes, lock
files and saves are in the trace. The delays are BLTK's `wl_office/scen` (1.1.x); `session.py`
re-expresses them step by step below.

    python3 session.py setup .      # untraced: copy LibreOffice in, make the samples and profile
    python3 session.py session .    # traced: ROUNDS rounds of ROUND_S seconds
"""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import uno  # python3-uno: the client end of the bridge (from the root file system)
from com.sun.star.awt import Point, Size
from com.sun.star.connection import NoConnectException
from com.sun.star.text.ControlCharacter import PARAGRAPH_BREAK
from com.sun.star.uno import RuntimeException as UnoRuntimeException

#: BLTK_WL_TIME: each round of the scenario is given 720 s, the rest is idle.
ROUND_S = float(os.environ.get("OFFICE_ROUND_S", "720"))
#: Rounds captured: the first starts from a cold page cache, the second is BLTK's steady state.
ROUNDS = int(os.environ.get("OFFICE_ROUNDS", "2"))
#: BLTK types text at 150 ms a character (TYPETEXT ... 150).
KEY_S = 0.150
PIPE = "wattio_office"
LIBREOFFICE = Path("/usr/lib/libreoffice")
ETC = Path("/etc/libreoffice")

# BLTK's texts (wl_office/text1..3): what its simulated user types into Writer and Draw.
TEXT1 = "    Leo Tolstoy - War and Peace\n"
TEXT2 = (
    "    This is the first attempt to make\n    openOffice workload more realistic.\n"
    "    To be or not to be, that is the question !!!\n    To be continued.\n"
)
TEXT3 = (
    "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. But "
    "I warn you, if you don't tell me that this means war, if you still try to defend the "
    "infamies and horrors perpetrated by that Antichrist - I really believe he is "
    "Antichrist - I will have nothing more to do with you and you are no longer my friend, "
    "no longer my 'faithful slave,' as you call yourself! But how do you do? I see I have "
    "frightened you - sit down and tell me all the news.\n"
)

CALC_ROWS = [
    ("Name", "Workdays", "Pay Rate", "Salary"),
    ("John", "12", "25"),
    ("Jane", "20", "20"),
    ("Sam", "15", "25"),
    ("Sarah", "10", "40"),
]


#: Scales every pause (1 = BLTK's pacing; smaller only to try the script out quickly).
PACE = float(os.environ.get("OFFICE_PACE", "1"))


def pause(seconds: float) -> None:
    time.sleep(seconds * PACE)


# --- the office suite -------------------------------------------------------------------------


class Office:
    """One start of the suite (BLTK's RUNCMD ... WAITFINISHCMD soffice.bin)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc = subprocess.Popen(
            [
                str(root / "libreoffice/program/soffice"),
                "--headless",
                "--invisible",
                "--nologo",
                "--norestore",
                "--nodefault",
                "--nolockcheck",
                f"-env:UserInstallation=file://{root}/profile",
                f"--accept=pipe,name={PIPE};urp;StarOffice.ComponentContext",
            ],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # `import uno` points URE_BOOTSTRAP at the installed suite: the copy has its own.
            env={k: v for k, v in os.environ.items() if k not in ("URE_BOOTSTRAP", "UNO_PATH")},
        )
        local = uno.getComponentContext()
        resolver = local.ServiceManager.createInstanceWithContext(
            "com.sun.star.bridge.UnoUrlResolver", local
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                self.ctx = resolver.resolve(f"uno:pipe,name={PIPE};urp;StarOffice.ComponentContext")
                break
            except NoConnectException:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("LibreOffice did not come up") from None
                time.sleep(0.05)
        self.desktop = self.ctx.ServiceManager.createInstanceWithContext(
            "com.sun.star.frame.Desktop", self.ctx
        )

    def prop(self, name: str, value):
        p = uno.createUnoStruct("com.sun.star.beans.PropertyValue")
        p.Name, p.Value = name, value
        return p

    def open(self, name: str):
        url = uno.systemPathToFileUrl(str(self.root / name))
        return self.desktop.loadComponentFromURL(url, "_blank", 0, (self.prop("Hidden", True),))

    def new(self, kind: str):
        return self.desktop.loadComponentFromURL(
            f"private:factory/{kind}", "_blank", 0, (self.prop("Hidden", True),)
        )

    def quit(self, doc) -> None:
        """Ctrl+Q: close the document and the suite, and wait for soffice.bin to exit."""
        doc.close(True)
        try:
            self.desktop.terminate()
        except UnoRuntimeException:  # DisposedException: the bridge went away with the process
            pass
        self.proc.wait(timeout=120)


def type_text(text_obj, cursor, s: str) -> None:
    for ch in s:
        if ch == "\n":
            text_obj.insertControlCharacter(cursor, PARAGRAPH_BREAK, False)
        else:
            text_obj.insertString(cursor, ch, False)
        pause(KEY_S)


def returns(text_obj, cursor, n: int, delay_s: float) -> None:
    """Return pressed ``n`` times, each followed by ``delay_s``."""
    for _ in range(n):
        text_obj.insertControlCharacter(cursor, PARAGRAPH_BREAK, False)
        pause(delay_s)


def keys(n: int, delay_s: float) -> None:
    """Keystrokes with no effect on the document's data (cursor moves, dialogs): their time."""
    pause(n * delay_s)


# --- the three applications, with BLTK's delays -----------------------------------------------


def writer(root: Path) -> None:
    office = Office(root)
    doc = office.open("OOWRITER_FILE.odt")
    text = doc.Text
    cur = text.createTextCursor()
    pause(0.15 + 3.0)
    returns(text, cur, 2, 3.0)
    type_text(text, cur, TEXT2)
    returns(text, cur, 2, 3.0)
    pause(3.0)
    # Ctrl+F, Return: the Find & Replace dialog; type both strings, Alt+L (replace all).
    keys(1, 1.0)
    pause(2.0)
    keys(1, 2.0)
    keys(len("openOffice"), KEY_S)
    keys(1, 1.0)
    keys(len("OpenOffice"), KEY_S)
    pause(2.0)
    rd = doc.createReplaceDescriptor()
    rd.SearchString, rd.ReplaceString = "openOffice", "OpenOffice"
    doc.replaceAll(rd)
    pause(3.0)
    keys(1, 3.0 + 0.15)  # the "search key replaced" box: Return
    keys(1, 1.0)
    pause(2.0)
    keys(1, 1.0)  # Alt+C closes the dialog
    keys(10, KEY_S)  # Down x10
    cur.gotoEnd(False)
    type_text(text, cur, TEXT1)
    returns(text, cur, 3, 3.0)
    pause(3.0)
    type_text(text, cur, TEXT3)
    returns(text, cur, 2, 3.0)
    pause(3.0)
    doc.store()  # Ctrl+S
    pause(1.0 + 2.0)
    office.quit(doc)  # Ctrl+Q
    pause(1.0 + 3.0)


def fill_pay_table(sheet) -> None:
    """The pay table BLTK types into Calc (and into Draw's spreadsheet object)."""
    cell = sheet.getCellByPosition
    for col, s in enumerate(CALC_ROWS[0]):
        keys(len(s), KEY_S)
        cell(col, 0).setString(s)
        keys(1, 1.0)
    keys(3, 0.5)
    for col in range(3):  # names, workdays, pay rates: a column at a time
        pause(3.0)
        for row in range(1, 5):
            s = CALC_ROWS[row][col]
            keys(len(s), KEY_S)
            if col == 0:
                cell(col, row).setString(s)
            else:
                cell(col, row).setValue(float(s))
            keys(1, 1.0)
        keys(3, 0.5)
    pause(3.0)
    keys(len("=b2*c2"), 0.3)
    cell(3, 1).setFormula("=B2*C2")
    keys(2, 1.0)
    keys(1, 1.0)  # Ctrl+C
    keys(1, 0.2)
    keys(2, 0.5)  # Shift+Down x2
    keys(1, 1.0)  # Ctrl+V
    for row in range(2, 5):
        cell(3, row).setFormula(f"=B{row + 1}*C{row + 1}")
    pause(3.0)
    keys(1, 1.0)
    keys(len("=sum("), 0.3)
    keys(1, 0.5)
    keys(3, 0.5)
    keys(1, 0.5)
    pause(1.0)
    cell(3, 5).setFormula("=SUM(D2:D5)")
    keys(1, 1.0)
    pause(3.0)
    keys(2, 1.0)
    keys(len("Total Pays"), KEY_S)
    cell(2, 5).setString("Total Pays")


def calc(root: Path) -> None:
    office = Office(root)
    doc = office.open("OOCALC_FILE.ods")
    pause(0.15 + 3.0)
    fill_pay_table(doc.Sheets.getByIndex(0))
    pause(3.0)
    doc.store()
    pause(1.0 + 2.0)
    office.quit(doc)
    pause(0.15 + 3.0)


def draw(root: Path) -> None:

    office = Office(root)
    doc = office.open("OODRAW_FILE.odg")
    page = doc.DrawPages.getByIndex(0)
    picture = page.getByIndex(0)
    pause(0.15 + 3.0)
    keys(1, 1.0)  # Tab selects the picture
    keys(1, 1.0)  # Alt+E, e: Edit > Duplicate
    keys(1, 0.15)
    pause(1.0)
    keys(1, 0.5)
    keys(1, 0.15 + 1.0)  # the Duplicate dialog: Return
    copy = doc.createInstance("com.sun.star.drawing.GraphicObjectShape")
    page.add(copy)
    copy.Graphic = picture.Graphic
    copy.Size = picture.Size
    copy.Position = Point(picture.Position.X + 500, picture.Position.Y + 500)
    pause(2.0)
    pause(0.15 + 2.0)
    keys(51, KEY_S)  # Down x51 and Left x5 move the copy
    keys(5, KEY_S)
    copy.Position = Point(copy.Position.X - 5 * 100, copy.Position.Y + 51 * 100)
    keys(1, 1.0)
    keys(56, KEY_S)  # Up x56, Return: into the picture's text
    keys(1, 0.5)
    text = copy.Text
    cur = text.createTextCursor()
    type_text(text, cur, TEXT2)
    returns(text, cur, 2, 1.0)
    pause(3.0)
    type_text(text, cur, TEXT1)
    returns(text, cur, 2, 1.0)
    pause(1.0)
    keys(1, 1.0)  # Esc
    keys(2, 1.0)  # Tab x2, Return x2
    keys(2, 1.0)
    pause(3.0)
    keys(1, 1.0)  # Alt+V, z: View > Zoom 150 %
    pause(2.0)
    keys(2, 0.5 + 0.5)
    pause(1.0)
    keys(5, KEY_S)
    keys(3, KEY_S)
    keys(2, 0.5 + 1.0)
    pause(0.15 + 2.0)
    keys(1, 1.0)  # Alt+I, o, o, Return x2: Insert > Object > OLE Object (a spreadsheet)
    keys(1, 0.15)
    pause(1.0)
    keys(1, 0.15)
    pause(1.0)
    keys(2, 0.5)
    ole = doc.createInstance("com.sun.star.drawing.OLE2Shape")
    page.add(ole)
    ole.CLSID = "47BBB4CB-CE4C-4E80-A591-42D9AE74950F"  # a Calc spreadsheet object
    ole.Position = Point(2000, 12000)
    keys(1, 0.15 + 0.5 + 1.0)
    fill_pay_table(ole.Model.Sheets.getByIndex(0))
    pause(3.0)
    keys(3, 3.0)  # Esc x3
    doc.store()
    pause(1.0 + 3.0)
    office.quit(doc)
    pause(1.0 + 3.0)


# --- setup (untraced) and the session (traced) ------------------------------------------------


def png(width: int, height: int) -> bytes:
    """A picture for Draw's sample: a gradient, so it is neither tiny nor incompressible."""
    rows = b"".join(
        b"\x00"
        + b"".join(
            bytes(((x * 3 + y * 5) % 256, (x ^ y) % 256, (y * 7 + x) % 256)) for x in range(width)
        )
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows, 6))
        + chunk(b"IEND", b"")
    )


def relocate(dest: Path) -> None:
    """Copy the installed suite to ``dest`` so that it runs from there. Debian's packaging points
    its bootstrap files at /usr/lib/libreoffice and /etc/libreoffice; the copy's point at
    itself, as upstream's do (``${ORIGIN}/..``), so that every file the suite reads at start-up
    is on the traced volume."""
    shutil.copytree(LIBREOFFICE, dest, symlinks=False)
    (dest / "etc").mkdir()
    shutil.copyfile(ETC / "sofficerc", dest / "etc/sofficerc")
    for name, subs in (
        (
            "fundamentalrc",
            (
                ("file:///usr/lib/libreoffice", "${ORIGIN}/.."),
                ("file:///etc/libreoffice/registry", "${BRAND_BASE_DIR}/share/registry"),
            ),
        ),
        ("sofficerc", (("file:///etc/libreoffice/sofficerc", "${ORIGIN}/../etc/sofficerc"),)),
    ):
        rc = dest / "program" / name
        text = rc.read_text()
        for old, new in subs:
            if old not in text:
                raise SystemExit(f"{rc}: no {old!r} to relocate (another LibreOffice packaging?)")
            text = text.replace(old, new)
        rc.write_text(text)


def setup(root: Path) -> None:
    """The installed suite, its profile after a first start, and BLTK's three sample files."""
    relocate(root / "libreoffice")
    (root / "picture.png").write_bytes(png(640, 480))
    office = Office(root)

    doc = office.new("swriter")
    cur = doc.Text.createTextCursor()
    for _ in range(40):  # a few pages of the novel the texts come from
        doc.Text.insertString(cur, TEXT3.strip(), False)
        doc.Text.insertControlCharacter(cur, PARAGRAPH_BREAK, False)
    doc.storeToURL(uno.systemPathToFileUrl(str(root / "OOWRITER_FILE_SAMPLE.odt")), ())
    doc.close(True)
    doc = office.new("scalc")
    doc.Sheets.getByIndex(0).getCellByPosition(0, 10).setString("Pays")
    doc.storeToURL(uno.systemPathToFileUrl(str(root / "OOCALC_FILE_SAMPLE.ods")), ())
    doc.close(True)
    doc = office.new("sdraw")
    shape = doc.createInstance("com.sun.star.drawing.GraphicObjectShape")
    page = doc.DrawPages.getByIndex(0)
    page.add(shape)
    shape.GraphicURL = uno.systemPathToFileUrl(str(root / "picture.png"))
    shape.Size = Size(12000, 9000)
    shape.Position = Point(2000, 2000)
    doc.storeToURL(uno.systemPathToFileUrl(str(root / "OODRAW_FILE_SAMPLE.odg")), ())
    office.quit(doc)
    (root / "picture.png").unlink()


class KeepCached:
    """Keeps the suite's pages that the session has read in the page cache, as a laptop's would.

    The VM this runs on drops its whole page cache every few minutes (with gigabytes free), so
    without this each start of the suite would read it from the disk again. Pages mapped into
    a process are not dropped, so a thread maps every file of the suite's directory (read
    only; nothing writes it during the session) and, once a second, touches the pages
    `mincore` reports resident. It reads nothing itself: only resident pages are touched, and
    MADV_RANDOM turns off fault read-ahead on these mappings."""

    PAGE = mmap.PAGESIZE
    PROT_READ, MAP_SHARED, MADV_RANDOM = 1, 1, 1

    def __init__(self, suite: Path) -> None:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        self.libc = libc
        self.files = []  # (address, pages, pages already touched)
        for path in sorted(suite.rglob("*")):
            if not path.is_file() or path.is_symlink() or path.stat().st_size == 0:
                continue
            size = path.stat().st_size
            fd = os.open(path, os.O_RDONLY)
            addr = libc.mmap(None, size, self.PROT_READ, self.MAP_SHARED, fd, 0)
            os.close(fd)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap {path}")
            libc.madvise(addr, size, self.MADV_RANDOM)
            pages = (size + self.PAGE - 1) // self.PAGE
            self.files.append((addr, pages, bytearray(pages)))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def sweep(self) -> int:
        touched = 0
        for addr, pages, done in self.files:
            if done.count(0) == 0:
                continue
            vec = ctypes.create_string_buffer(pages)
            if self.libc.mincore(addr, pages * self.PAGE, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            for i, r in enumerate(vec.raw[:pages]):
                if r & 1 and not done[i]:
                    _ = ctypes.c_char.from_address(addr + i * self.PAGE).value  # maps it, no I/O
                    done[i] = 1
                    touched += 1
        return touched

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.sweep()


def session(root: Path) -> None:
    keep = KeepCached(root / "libreoffice")
    keep.thread.start()
    for _ in range(ROUNDS):
        start = time.monotonic()
        for name in ("OOWRITER_FILE.odt", "OOCALC_FILE.ods", "OODRAW_FILE.odg"):  # BLTK's run1
            shutil.copyfile(root / name.replace(".", "_SAMPLE."), root / name)
        writer(root)
        calc(root)
        draw(root)
        idle = ROUND_S - (time.monotonic() - start)
        print(f"round: work {ROUND_S - idle:.1f} s, idle {max(idle, 0):.1f} s", file=sys.stderr)
        pause(max(idle, 0.0))


if __name__ == "__main__":
    {"setup": setup, "session": session}[sys.argv[1]](Path(sys.argv[2]).resolve())
