#!/usr/bin/env python3
"""scripts/check_doc_figures.py on made-up docs: a figure that no longer reproduces fails the
check, --match keeps only matching commands, --update rewrites the stale value in place (and only
it), and figures in subfolders (docs/reports/) are found. Usage: check_doc_figures_test.py <source dir>."""
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = sys.argv.pop(1) if len(sys.argv) > 1 else os.getcwd()
SCRIPT = os.path.join(SOURCE, "scripts/check_doc_figures.py")
DOC = ("a <!-- figure key=x format={:d} cmd: echo x=5 -->4<!-- /figure --> and "
       "<!-- figure slow key=y format={:.1f} cmd: echo y=2.25 -->2.2<!-- /figure -->\n")


class CheckDocFiguresTest(unittest.TestCase):
    def run_script(self, docs, *extra):
        return subprocess.run([sys.executable, SCRIPT, f"--docs={docs}", *extra],
                              capture_output=True, text=True)

    def test_stale_figure_fails_and_update_rewrites_it(self):
        with tempfile.TemporaryDirectory() as docs:
            path = os.path.join(docs, "a.md")
            with open(path, "w") as f:
                f.write(DOC)
            done = self.run_script(docs, "--all")
            self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
            self.assertIn("documented as 4 but the command now gives 5", done.stdout)
            self.assertIn("y = 2.2 reproduces", done.stdout)
            done = self.run_script(docs, "--all", "--match=x=", "--update", "--jobs=2")
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            with open(path) as f:
                text = f.read()
            self.assertIn("cmd: echo x=5 -->5<!-- /figure -->", text)
            self.assertIn("cmd: echo y=2.25 -->2.2<!-- /figure -->", text)
            self.assertEqual(self.run_script(docs, "--all").returncode, 0)

    def test_figures_in_subfolders_are_checked(self):
        with tempfile.TemporaryDirectory() as docs:
            os.makedirs(os.path.join(docs, "reports"))
            with open(os.path.join(docs, "reports", "b.md"), "w") as f:
                f.write(DOC)
            done = self.run_script(docs, "--list")
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            self.assertIn(os.path.join("reports", "b.md"), done.stdout)
            self.assertEqual(self.run_script(docs, "--all").returncode, 1)


if __name__ == "__main__":
    unittest.main()
