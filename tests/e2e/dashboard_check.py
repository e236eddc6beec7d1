#!/usr/bin/env python3
"""The orchestrator's dashboard in headless Chromium (issue #20), driven by Selenium.

    dashboard_check.py URL TOKEN_FILE HOSTS CONTAINER CUT_CMD RESTORE_CMD

Checks: a wrong token shows the login form and the refusal; URL/ui/?token= signs in and takes
the token out of the address bar; the page names every host h1..hHOSTS, its heatmap has
HOSTS x HOSTS cells, and lists CONTAINER under usage; after CUT_CMD (which cuts the last
host's link) the cells of the other hosts' probes to it turn "down", and after RESTORE_CMD
"up" again. Exits 0 if all hold, 1 otherwise (printing what did not).
"""
import subprocess
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def wait_for(what, check, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:  # the page is being redrawn: look again
            pass
        time.sleep(0.25)
    print(f'dashboard_check: FAIL: {what} not within {limit} s')
    return False


def main():
    url, token_file, hosts, container, cut, restore = sys.argv[1:7]
    hosts = int(hosts)
    token = open(token_file).read().strip()
    options = webdriver.ChromeOptions()
    options.binary_location = '/usr/bin/chromium'
    for arg in ('--headless=new', '--no-sandbox', '--disable-gpu', '--window-size=1400,1000'):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=options)
    ok = True
    try:
        driver.get(url + '/ui/?token=not-a-token')
        ok &= wait_for('the login form after a wrong token',
                       lambda: driver.find_element(By.ID, 'login').is_displayed() and
                       'refused' in driver.find_element(By.ID, 'login-error').text, 15)

        driver.get(url + '/ui/?token=' + token)
        ok &= wait_for('the views after signing in',
                       lambda: driver.find_element(By.ID, 'views').is_displayed(), 15)
        ok &= wait_for('the token gone from the address bar',
                       lambda: 'token=' not in driver.current_url, 5)
        names = [f'h{k}' for k in range(1, hosts + 1)]
        ok &= wait_for(f'every host ({names}) in the hosts table', lambda: [
            r.find_element(By.TAG_NAME, 'td').text
            for r in driver.find_elements(By.CSS_SELECTOR, '#hosts tbody tr')] == names, 15)
        cells = lambda: driver.find_elements(By.CSS_SELECTOR, '#pingmesh rect.cell')
        ok &= wait_for(f'{hosts}x{hosts} heatmap cells', lambda: len(cells()) == hosts * hosts, 15)
        ok &= wait_for(f'{container} under usage', lambda: container in
                       driver.find_element(By.ID, 'usage').text, 15)

        def states(to):
            return {c.get_attribute('data-from'): c.get_attribute('data-state')
                    for c in cells() if c.get_attribute('data-to') == to}
        last = names[-1]
        others = names[:-1]
        ok &= wait_for(f'probes to {last} up', lambda: all(
            states(last)[h] == 'up' for h in others), 15)
        subprocess.run(cut, shell=True, check=True)
        ok &= wait_for(f'the cut of {last} shown down by {others}', lambda: all(
            states(last)[h] == 'down' for h in others), 30)
        driver.save_screenshot('/tmp/wharf-dashboard-cut.png')
        subprocess.run(restore, shell=True, check=True)
        ok &= wait_for(f'{last} shown up again', lambda: all(
            states(last)[h] == 'up' for h in others), 30)
    finally:
        driver.quit()
    print('dashboard_check: ' + ('PASS' if ok else 'FAIL'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
