#!/usr/bin/env bash
# Cold launch of python3 importing a heavy set of standard-library modules.
source "$(dirname "$0")/../capture.sh"
capture_launch -- /usr/bin/python3 -c "import asyncio, decimal, email.mime.multipart, http.server, json, logging.handlers, multiprocessing, sqlite3, unittest, urllib.request, xml.dom.minidom, zipfile"
