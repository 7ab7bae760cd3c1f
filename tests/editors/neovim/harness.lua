-- What both Neovim drivers share: the spec, the result, a hard time limit, and waiting on the main
-- loop for what the editor shows. `dofile` it from a driver; `on_timeout(result)` (optional) adds
-- what the driver wants to know when the limit hits.

local H = {}

H.spec = vim.fn.json_decode(table.concat(vim.fn.readfile(vim.env.DSH_EDITOR_SPEC), "\n"))
H.result = {}
H.on_timeout = nil
local finished = false
local current_step = "start"

function H.finish(err)
  if finished then
    return
  end
  finished = true
  H.result.error = err
  H.result.last_step = current_step
  vim.fn.writefile({ vim.fn.json_encode(H.result) }, H.spec.result)
  if err then
    vim.cmd("cquit 2")
  else
    vim.cmd("qall!")
  end
end

-- Hard limit: a hung server or a missed event must fail the run, never hang CI.
vim.defer_fn(function()
  if H.on_timeout then
    pcall(H.on_timeout, H.result)
  end
  H.finish("timeout while waiting for: " .. current_step)
end, H.spec.timeout_ms)

function H.guard(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then
      H.finish("lua error in " .. current_step .. ": " .. tostring(err))
    end
  end
end

-- Poll `ready` every 30 ms on the main loop; run `after` once it returns a truthy value.
function H.wait_for(name, ready, after)
  current_step = name
  local function poll()
    if finished then
      return
    end
    local value = ready()
    if value then
      H.guard(after)(value)
    else
      vim.defer_fn(H.guard(poll), 30)
    end
  end
  vim.defer_fn(H.guard(poll), 30)
end

function H.keys(text)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(text, true, false, true), "m", false)
end

-- The user's configuration, as documented: loaded before any file, as init.lua would be.
local config_ok, config_err = true, nil
function H.load_config()
  config_ok, config_err = pcall(dofile, H.spec.config)
end

-- Run the driver's script once Neovim has started, if the configuration loaded.
function H.start(run)
  vim.api.nvim_create_autocmd("VimEnter", {
    once = true,
    callback = H.guard(function()
      if not config_ok then
        return H.finish("the documented configuration failed to load: " .. tostring(config_err))
      end
      H.result.lsp_log = vim.lsp.get_log_path()
      run()
    end),
  })
end

return H
